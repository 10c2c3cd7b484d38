package policy

import (
	"testing"
	"time"

	"github.com/memcgd/memcgd/memcg"
)

const mib = 1 << 20

// seed001 is the seed's cgroup: a 500m limit and the watermarks sized from
// it (low 3663360, high 4396032).
func seed001() (limit uint64, w memcg.Watermarks) {
	limit = 500 * mib
	return limit, memcg.Knobs{MinFreeKbytes: memcg.MinFreeAuto}.Watermarks(limit)
}

func TestBackgroundReclaimWatermarks(t *testing.T) {
	limit, w := seed001()
	type step struct {
		free        uint64
		wantReclaim uint64
		wantStart   bool // a kswapd run starts: the driver counts it
	}
	tests := []struct {
		name  string
		w     memcg.Watermarks
		steps []step
	}{
		{
			name: "seed 001: kswapd wakes below low_wmark and stops at high_wmark",
			w:    w,
			steps: []step{
				{free: 8 * mib, wantReclaim: 0},                           // plenty free: asleep
				{free: 3663360, wantReclaim: 0},                           // at low: not below it
				{free: 3663360 - 1, wantReclaim: 733184, wantStart: true}, // below low: wake, reclaim to high (4396032 - 3663359 in pages)
				{free: 4000000, wantReclaim: 397312},                      // between: keeps running to high (396032 in pages)
				{free: 4396032, wantReclaim: 0},                           // reached high: sleeps
				{free: 4000000, wantReclaim: 0},                           // between, asleep: stays asleep
				{free: 1 * mib, wantReclaim: 3350528, wantStart: true},    // below low again: a new run (4396032 - 1 MiB in pages)
			},
		},
		{
			name:  "seed 001: min_free_kbytes 0 disables per cgroup kswapd",
			w:     memcg.Knobs{MinFreeKbytes: 0}.Watermarks(limit),
			steps: []step{{free: 0}, {free: 1 * mib}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewController()
			now := time.Unix(0, 0)
			for i, st := range tt.steps {
				now = now.Add(time.Second)
				d := c.Step(Input{
					Now:        now,
					Stat:       memcg.Stat{Limit: limit, Usage: limit - st.free},
					Dirty:      memcg.DirtyLimits{Background: memcg.NoLimit, Limit: memcg.NoLimit},
					Watermarks: tt.w,
				})
				if d.Reclaim != st.wantReclaim {
					t.Errorf("step %d (free %d): Reclaim = %d, want %d", i, st.free, d.Reclaim, st.wantReclaim)
				}
				if d.ReclaimStart != st.wantStart {
					t.Errorf("step %d (free %d): ReclaimStart = %v, want %v", i, st.free, d.ReclaimStart, st.wantStart)
				}
				if (d.Why&ReasonWatermark != 0) != (st.wantReclaim > 0) {
					t.Errorf("step %d: Why = %v", i, d.Why)
				}
			}
		})
	}
}

func TestReclaimWriteback(t *testing.T) {
	limit, w := seed001()
	below := limit - 1*mib // usage leaving 1 MiB free: below low_wmark
	tests := []struct {
		name           string
		dirtyPages     uint64
		writebackFirst bool
		usage          uint64
		wantWriteOut   bool
		wantFlush      bool
		clean          uint64 // clean page cache beside the dirty pages
	}{
		{"seed 000: reclaim with many dirty pages writes back the cgroup's own first", 1000, true, below, true, false, 0},
		{"seed 000: fewer than 64 dirty pages falls back to a full flush", 63, true, below, false, true, 0},
		{"seed 000: exactly 64 is not more than MIN_WB_DIRTY_PAGES: full flush", 64, true, below, false, true, 0},
		{"seed 000: 65 dirty pages is enough for the cgroup's own", 65, true, below, true, false, 0},
		{"stock kernel (writeback_first off): reclaim wakes every flusher", 1000, false, below, false, true, 0},
		{"no dirty pages: reclaim needs no writeback", 0, true, below, false, false, 0},
		{"no reclaim due: dirty pages are left to the dirty limits", 1000, true, 100 * mib, false, false, 0},
		{"clean page cache covers the reclaim: no writeback needed", 1000, true, below, false, false, 64 * mib},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewController()
			d := c.Step(Input{
				Now:            time.Unix(1, 0),
				Stat:           memcg.Stat{Limit: limit, Usage: tt.usage, Dirty: tt.dirtyPages * memcg.PageSize, File: tt.dirtyPages*memcg.PageSize + tt.clean},
				Dirty:          memcg.DirtyLimits{Background: memcg.NoLimit, Limit: memcg.NoLimit},
				Watermarks:     w,
				WritebackFirst: tt.writebackFirst,
			})
			if d.WriteOut != tt.wantWriteOut || d.Flush != tt.wantFlush {
				t.Errorf("WriteOut, Flush = %v, %v, want %v, %v (%v)", d.WriteOut, d.Flush, tt.wantWriteOut, tt.wantFlush, d.Why)
			}
			if (d.Why&ReasonReclaimWriteback != 0) != (tt.wantWriteOut || tt.wantFlush) {
				t.Errorf("Why = %v", d.Why)
			}
		})
	}
}

func TestDirtyLimitDecisions(t *testing.T) {
	limits := memcg.DirtyLimits{Background: 8 * mib, Limit: 16 * mib} // seed 004 style: dirty_bytes 16M, background 8M
	tests := []struct {
		name             string
		dirty, writeback uint64
		noFreezer        bool
		wantWriteOut     bool
		wantThrottle     Throttle
		wantWhyThrottle  bool
	}{
		{"seed 004: below dirty_background nothing happens", 4 * mib, 0, false, false, ThrottleNone, false},
		{"seed 004: past dirty_background the cgroup's files are written out", 9 * mib, 0, false, true, ThrottleNone, false},
		{"background compares dirty alone, as wb_over_bg_thresh does", 7 * mib, 4 * mib, false, false, ThrottleNone, false},
		{"seed 004: at the limit (dirty+writeback) writers are throttled", 10 * mib, 6 * mib, false, true, ThrottleFreeze, true},
		{"past the limit too", 20 * mib, 0, false, true, ThrottleFreeze, true},
		{"with nothing that can stop the tasks, the throttle is due but not done", 20 * mib, 0, true, true, ThrottleNone, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewController()
			in := Input{Now: time.Unix(1, 0), Stat: memcg.Stat{Limit: 1 << 30, Dirty: tt.dirty, Writeback: tt.writeback}, Dirty: limits, Freezer: FreezerHeld}
			if tt.noFreezer {
				in.Freezer = FreezerNone
			}
			d := c.Step(in)
			if d.WriteOut != tt.wantWriteOut {
				t.Errorf("WriteOut = %v, want %v", d.WriteOut, tt.wantWriteOut)
			}
			if d.Throttle != tt.wantThrottle {
				t.Errorf("Throttle = %v, want %v", d.Throttle, tt.wantThrottle)
			}
			if got := d.Why&ReasonThrottle != 0; got != tt.wantWhyThrottle {
				t.Errorf("Why = %v, want throttle in it: %v", d.Why, tt.wantWhyThrottle)
			}
		})
	}
}

func TestNoThrottleWithoutALimit(t *testing.T) {
	c := NewController()
	d := c.Step(Input{Now: time.Unix(1, 0), Stat: memcg.Stat{Limit: memcg.NoLimit, Dirty: 1 << 40},
		Dirty: memcg.DirtyLimits{Background: memcg.NoLimit, Limit: memcg.NoLimit}})
	if !d.Idle() {
		t.Errorf("unlimited cgroup got %+v", d)
	}
}

func TestDirtiedBytesMeasureBandwidth(t *testing.T) {
	// v1 attributes no writeback to a cgroup; its tasks' write_bytes count
	// what they dirtied. 10 MiB dirtied while dirty grew 2 MiB means 8 MiB
	// were written: 80 MiB/s over 100 ms, folded into the average at
	// 100ms/4096ms weight.
	c := NewController()
	t0 := time.Unix(1, 0)
	lim := memcg.DirtyLimits{Background: memcg.NoLimit, Limit: memcg.NoLimit}
	c.Step(Input{Now: t0, Stat: memcg.Stat{Dirty: 4 * mib, Counters: memcg.Counters{HasDirtied: true, DirtiedBytes: 1000}}, Dirty: lim})
	c.Step(Input{Now: t0.Add(100 * time.Millisecond), Stat: memcg.Stat{Dirty: 6 * mib, Counters: memcg.Counters{HasDirtied: true, DirtiedBytes: 1000 + 10*mib}}, Dirty: lim})
	w := 100.0 / 4096
	want := 80.0*mib*w + InitBW*(1-w)
	if got := c.bw.bw; got < want*0.999 || got > want*1.001 {
		t.Errorf("write_bandwidth = %.0f, want %.0f", got, want)
	}
	// The charge rate follows the dirtying, though usage did not move
	// (a cgroup at its limit): 100 MiB/s over 100 ms, the whole window
	// over which the estimate rises.
	if want := 100.0 * mib; c.growth < want*0.999 || c.growth > want*1.001 {
		t.Errorf("growth = %.0f B/s, want %.0f", c.growth, want)
	}
}

// Dirty pages dropped unwritten (a deleted file's) leave dirty+writeback
// without the device writing them: where the host counts them, they are
// not learnt as bandwidth. Without the count the fall reads as written.
func TestCancelledBytesAreNotWritten(t *testing.T) {
	for _, tt := range []struct {
		name      string
		cancelled *uint64 // the counter's growth; nil: not counted
		written   float64 // bytes the step learns as written in 100 ms
	}{
		{"counted", ptr(uint64(30 * mib)), 2 * mib},
		{"not counted", nil, 32 * mib},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// 10 MiB dirtied while dirty+writeback fell from 40 to 18 MiB:
			// 32 MiB left it, of which 30 were a file deleted dirty.
			c := NewController()
			t0 := time.Unix(1, 0)
			lim := memcg.DirtyLimits{Background: memcg.NoLimit, Limit: memcg.NoLimit}
			counters := func(dirtied, cancelled uint64) memcg.Counters {
				ctr := memcg.Counters{HasDirtied: true, DirtiedBytes: dirtied}
				if tt.cancelled != nil {
					ctr.HasCancelled, ctr.CancelledBytes = true, cancelled
				}
				return ctr
			}
			c.Step(Input{Now: t0, Stat: memcg.Stat{Dirty: 40 * mib, Counters: counters(1000, 500)}, Dirty: lim})
			var grown uint64
			if tt.cancelled != nil {
				grown = *tt.cancelled
			}
			c.Step(Input{Now: t0.Add(100 * time.Millisecond), Stat: memcg.Stat{Dirty: 18 * mib, Counters: counters(1000+10*mib, 500+grown)}, Dirty: lim})
			w := 100.0 / 4096
			want := tt.written/0.1*w + InitBW*(1-w)
			if got := c.bw.bw; got < want*0.999 || got > want*1.001 {
				t.Errorf("write_bandwidth = %.0f, want %.0f (%.0f MiB written in 100 ms)", got, want, tt.written/mib)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestKswapdAnticipatesGrowthOverTheHorizon(t *testing.T) {
	// A cgroup growing at 100 MiB/s, looked at every 10 ms: over the
	// horizon (the reaction delay and the active interval) it would fall
	// below low before the next look could come, so the userspace kswapd
	// wakes while free is still above low; the run reclaims what is left
	// to high, no more, a step at a time.
	limit, w := seed001()
	c := NewController()
	t0 := time.Unix(1, 0)
	usage := limit - 65*mib
	var in Input
	var woke bool
	for i := 0; i < 200 && !woke; i++ {
		in = Input{Now: t0.Add(time.Duration(i) * 10 * time.Millisecond), Stat: memcg.Stat{Limit: limit, Usage: usage},
			Dirty: memcg.DirtyLimits{Background: memcg.NoLimit, Limit: memcg.NoLimit}, Watermarks: w,
			Reaction: 20 * time.Millisecond, ActiveInterval: 80 * time.Millisecond, ReclaimStep: 1 << 30}
		d := c.Step(in)
		if d.ReclaimStart {
			woke = true
			free := in.Stat.Free()
			if free < w.Low {
				t.Errorf("woke with free %d below low %d: growth was not anticipated", free, w.Low)
			}
			if want := pageUp(w.High - free); d.Reclaim != want {
				t.Errorf("Reclaim = %d, want what is left to high in pages, %d", d.Reclaim, want)
			}
			// One decision reclaims a step at most.
			in.ReclaimStep = 64 << 10
			c3 := *c
			c3.reclaiming = false
			if d3 := c3.Step(in); d3.Reclaim != 64<<10 {
				t.Errorf("ReclaimStep 64 KiB: Reclaim = %d, want the step", d3.Reclaim)
			}
			// The kernel's kswapd (no horizon) sleeps in the same state.
			in.Reaction, in.ActiveInterval, in.ReclaimStep = 0, 0, 0
			if d := NewController().Step(in); d.Reclaim != 0 {
				t.Errorf("no horizon: reclaimed %d with free above low", d.Reclaim)
			}
		}
		usage += 1 * mib // 100 MiB/s
	}
	if !woke {
		t.Fatalf("never woke")
	}
}

func TestEpisodeKeepsEveryDirtyPageInFlight(t *testing.T) {
	const kib = 1 << 10
	min := uint64(MinWbDirtyPages * memcg.PageSize) // 256 KiB
	// dirty_bytes 16M, dirty_background_bytes 8M: freerun 12 MiB.
	steps := []struct {
		at               time.Duration
		dirty, writeback uint64
		dirtied          uint64 // the tasks' dirtied-bytes counter
		wantEpisode      bool
		wantWriteOut     bool
		wantWhy          Reason // of the write-out: background or throttle
	}{
		{at: 0, dirty: 4 * mib, dirtied: 10 * mib, writeback: 6 * mib},                                                                       // below background, no episode: the kernel waits
		{at: 1 * ms, dirty: 5 * mib, dirtied: 16 * mib, writeback: 11 * mib, wantEpisode: true, wantWriteOut: true, wantWhy: ReasonThrottle}, // frozen at the limit with dirty below background: written out all the same
		{at: 2 * ms, dirty: min, dirtied: 16 * mib, writeback: 15 * mib, wantEpisode: true},                                                  // MIN_WB_DIRTY_PAGES exactly: not worth a pass
		{at: 3 * ms, dirty: min + 4*kib, dirtied: 16 * mib, writeback: 15 * mib, wantEpisode: true, wantWriteOut: true, wantWhy: ReasonThrottle},
		{at: 20 * ms, dirty: 1 * mib, dirtied: 16 * mib, writeback: 2 * mib, wantEpisode: true, wantWriteOut: true, wantWhy: ReasonThrottle}, // thawed, the episode lingers
		{at: 300 * ms, dirty: 0, dirtied: 16 * mib, writeback: 0, wantEpisode: true},                                                         // the writer stopped
		{at: 2 * time.Second, dirty: 4 * mib, dirtied: 20 * mib, writeback: 0},                                                               // the episode is over: back to the background threshold
		{at: 2*time.Second + 1*ms, dirty: 9 * mib, dirtied: 25 * mib, writeback: 0, wantWriteOut: true, wantWhy: ReasonBackground},           // past it
	}
	c := NewController()
	var dr throttleDriver
	t0 := time.Unix(100, 0)
	for i, st := range steps {
		now := t0.Add(st.at)
		in := scenarioInput(now, st.dirty, st.writeback, st.dirtied)
		in.Freezer, in.Frozen = FreezerHeld, dr.at(now)
		d := c.Step(in)
		dr.carry(now, d)
		if d.Episode != st.wantEpisode || d.WriteOut != st.wantWriteOut {
			t.Errorf("step %d (dirty %d KiB, writeback %d KiB): Episode %v WriteOut %v, want %v %v",
				i, st.dirty/kib, st.writeback/kib, d.Episode, d.WriteOut, st.wantEpisode, st.wantWriteOut)
		}
		if st.wantWriteOut && d.Why&st.wantWhy == 0 {
			t.Errorf("step %d: Why = %v, want %v among them", i, d.Why, st.wantWhy)
		}
	}
}

// A cgroup that holds the daemon is written out, but neither throttled
// nor reclaimed, whatever its dirty pages and free memory.
func TestExemptCgroupIsWrittenOutButNeitherThrottledNorReclaimed(t *testing.T) {
	limit, w := seed001()
	in := Input{Now: time.Unix(1, 0), Stat: memcg.Stat{Limit: limit, Usage: limit - 1*mib, File: limit - 1*mib, Dirty: 20 * mib},
		Dirty: memcg.DirtyLimits{Background: 8 * mib, Limit: 16 * mib}, Watermarks: w, Freezer: FreezerHeld, Exempt: true}
	d := NewController().Step(in)
	if !d.WriteOut || d.Throttle != ThrottleNone || d.Episode || d.Reclaim != 0 || d.ReclaimStart {
		t.Errorf("exempt: WriteOut %v Throttle %v Episode %v Reclaim %d ReclaimStart %v; want a write-out only",
			d.WriteOut, d.Throttle, d.Episode, d.Reclaim, d.ReclaimStart)
	}
	in.Exempt = false
	if d := NewController().Step(in); d.Throttle != ThrottleFreeze || d.Reclaim == 0 {
		t.Errorf("the same cgroup not exempt: Throttle %v Reclaim %d; want a freeze and reclaim", d.Throttle, d.Reclaim)
	}
}

// Reclaim that finds nothing (anonymous memory without swap) is not asked
// for at every step: the attempts back off, the cgroup waits idle with a
// usage watch a reclaim step above, anonymous growth does not end the
// wait, and new page cache does.
func TestReclaimThatFindsNothingBacksOff(t *testing.T) {
	const active = 5 * time.Millisecond
	limit, w := seed001() // low, high a few MiB
	anon := memcg.Stat{Limit: limit, Usage: limit - w.Low/2, Anon: limit - w.Low/2}
	noDirty := memcg.DirtyLimits{Background: memcg.NoLimit, Limit: memcg.NoLimit}
	t0 := time.Unix(1000, 0)
	step := func(c *Controller, at time.Duration, s memcg.Stat) Decision {
		return c.Step(Input{Now: t0.Add(at), Stat: s, Dirty: noDirty, Watermarks: w, ActiveInterval: active, Freezer: FreezerHeld})
	}
	c := NewController()
	var at time.Duration
	for i := 1; i <= 4; i++ {
		d := step(c, at, anon)
		if d.Reclaim == 0 {
			t.Fatalf("attempt %d at +%v: no reclaim asked for", i, at)
		}
		c.ReclaimDone(t0.Add(at), anon, true, active)
		wait := active << (i - 1) // 5, 10, 20, 40 ms
		d = step(c, at+wait-time.Millisecond, anon)
		if d.Reclaim != 0 || d.Active {
			t.Fatalf("after failure %d, %v later: Reclaim %d Active %v, want none, idle", i, wait-time.Millisecond, d.Reclaim, d.Active)
		}
		if d.NextLook != max(time.Millisecond, active) {
			t.Errorf("after failure %d: NextLook %v, want the backoff's end or the active interval", i, d.NextLook)
		}
		if want := anon.Usage + DefaultReclaimStep; d.Wake.UsageAbove != want {
			t.Errorf("after failure %d: UsageAbove %d, want usage plus a reclaim step %d", i, d.Wake.UsageAbove, want)
		}
		at += wait
	}
	grown := anon
	grown.Anon += 2 * DefaultReclaimStep
	grown.Usage += 2 * DefaultReclaimStep
	if d := step(c, at-time.Millisecond, grown); d.Reclaim != 0 {
		t.Errorf("anonymous growth ended the backoff: Reclaim %d", d.Reclaim)
	}
	cache := anon
	cache.File += DefaultReclaimStep
	cache.Usage += DefaultReclaimStep
	if d := step(c, at-time.Millisecond, cache); d.Reclaim == 0 {
		t.Errorf("a reclaim step of new page cache did not end the backoff")
	}
}

func TestThePaceWritesOutAChunkAtATime(t *testing.T) {
	const kib = 1 << 10
	chunk := uint64(MinWritebackPages * memcg.PageSize) // 4 MiB
	// dirty_bytes 16M, dirty_background_bytes 8M: freerun 12 MiB.
	steps := []struct {
		name             string
		at               time.Duration
		dirty, writeback uint64
		wantWriteOut     bool
		unpaceable       bool // pacing became unavailable (Input.Pacer false): the freezer throttles
	}{
		{"below the background threshold, never paced: the kernel waits", 0, 4 * mib, 2 * mib, false, false},
		{"dirty+writeback past the background threshold, a chunk dirty: paced, and written out", 1 * ms, chunk, 7 * mib, true, false},
		{"less than a chunk dirty: not worth a write-out", 2 * ms, chunk - 4*kib, 9 * mib, false, false},
		{"more than a chunk", 3 * ms, chunk + 4*kib, 8 * mib, true, false},
		{"back below the background threshold, the pace lingering: still written out", 10 * ms, 5 * mib, 1 * mib, true, false},
		{"the pace released, PaceLinger later: back to the background threshold", 10*ms + PaceLinger, 5 * mib, 1 * mib, false, false},
		{"paced again", 20*ms + PaceLinger, 5 * mib, 7 * mib, true, false},
		{"pacing unavailable for the cgroup: the pace left on is not the freezer's, whose episode rules", 30*ms + PaceLinger, 5 * mib, 7 * mib, false, true},
	}
	c := NewController()
	t0 := time.Unix(100, 0)
	var paced Pacing
	for _, st := range steps {
		in := scenarioInput(t0.Add(st.at), st.dirty, st.writeback, 0)
		in.Freezer, in.Pacer, in.Paced = FreezerHeld, !st.unpaceable, paced
		d := c.Step(in)
		paced = d.Pace
		if d.WriteOut != st.wantWriteOut {
			t.Errorf("%s (dirty %d KiB, writeback %d KiB): WriteOut %v, want %v", st.name, st.dirty/kib, st.writeback/kib, d.WriteOut, st.wantWriteOut)
		}
		if st.wantWriteOut && d.Why&ReasonThrottle == 0 {
			t.Errorf("%s: Why = %v, want ReasonThrottle among them", st.name, d.Why)
		}
	}
}

func TestPaceWriteOutAt(t *testing.T) {
	for _, tt := range []struct {
		name       string
		background uint64
		want       uint64
	}{
		{"a flusher's chunk, MIN_WRITEBACK_PAGES", 32 * mib, 4 * mib},
		{"the background threshold where that is lower: a small cgroup", 2 * mib, 2 * mib},
	} {
		if got := paceWriteOutAt(memcg.DirtyLimits{Background: tt.background, Limit: 2 * tt.background}); got != tt.want {
			t.Errorf("%s: paceWriteOutAt(background %d MiB) = %d KiB, want %d KiB", tt.name, tt.background/mib, got>>10, tt.want>>10)
		}
	}
}
