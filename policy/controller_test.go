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
				{free: 8 * mib, wantReclaim: 0},                                      // plenty free: asleep
				{free: 3663360, wantReclaim: 0},                                      // at low: not below it
				{free: 3663360 - 1, wantReclaim: 4396032 - 3663359, wantStart: true}, // below low: wake, reclaim to high
				{free: 4000000, wantReclaim: 396032},                                 // between: keeps running to high
				{free: 4396032, wantReclaim: 0},                                      // reached high: sleeps
				{free: 4000000, wantReclaim: 0},                                      // between, asleep: stays asleep
				{free: 1 * mib, wantReclaim: 4396032 - 1*mib, wantStart: true},       // below low again: a new run
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
		wantWriteOut     bool
		wantPause        bool
		wantPauseOf      time.Duration // when non-zero: the drain time to freerun
	}{
		{"seed 004: below dirty_background nothing happens", 4 * mib, 0, false, false, 0},
		{"seed 004: past dirty_background the cgroup's files are written out", 9 * mib, 0, true, false, 0},
		{"background compares dirty alone, as wb_over_bg_thresh does", 7 * mib, 4 * mib, false, false, 0},
		// freerun 12M; at InitBW (100 MiB/s) 4 MiB drain in 40 ms, 8 MiB in 80 ms
		{"seed 004: at the limit writers pause until dirty is back at freerun", 10 * mib, 6 * mib, true, true, 40 * time.Millisecond},
		{"past the limit, longer", 20 * mib, 0, true, true, 80 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewController()
			in := Input{Now: time.Unix(1, 0), Stat: memcg.Stat{Limit: 1 << 30, Dirty: tt.dirty, Writeback: tt.writeback}, Dirty: limits}
			c.Step(in) // first observation sets the baseline
			in.Now = in.Now.Add(100 * time.Millisecond)
			d := c.Step(in)
			if d.WriteOut != tt.wantWriteOut {
				t.Errorf("WriteOut = %v, want %v", d.WriteOut, tt.wantWriteOut)
			}
			if (d.Pause > 0) != tt.wantPause {
				t.Errorf("Pause = %v, want a pause: %v", d.Pause, tt.wantPause)
			}
			if tt.wantPauseOf != 0 && d.Pause != tt.wantPauseOf {
				t.Errorf("Pause = %v, want %v", d.Pause, tt.wantPauseOf)
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
	// (a cgroup at its limit): 100 MiB/s over 100 ms of a 1 s window.
	if want := 100.0 * mib * 0.1; c.growth < want*0.999 || c.growth > want*1.001 {
		t.Errorf("growth = %.0f B/s, want %.0f", c.growth, want)
	}
}

func TestKswapdAnticipatesGrowthOverTheHorizon(t *testing.T) {
	// A cgroup growing at 100 MiB/s, looked at every 100 ms, loses
	// several MiB of free space before the next look: with Lead, a
	// userspace kswapd wakes while free is still above low, and reclaims
	// enough to be at high after the growth.
	limit, w := seed001()
	lead := 100 * time.Millisecond
	c := NewController()
	t0 := time.Unix(1, 0)
	usage := limit - 65*mib
	var d Decision
	var in Input
	for i := 0; i < 60; i++ {
		in = Input{Now: t0.Add(time.Duration(i) * 10 * time.Millisecond), Stat: memcg.Stat{Limit: limit, Usage: usage},
			Dirty: memcg.DirtyLimits{Background: memcg.NoLimit, Limit: memcg.NoLimit}, Watermarks: w, Lead: lead}
		d = c.Step(in)
		usage += 1 * mib // 100 MiB/s
	}
	free := in.Stat.Free()
	if free <= w.High {
		t.Fatalf("test setup: free %d not above high %d", free, w.High)
	}
	ahead := uint64(c.growth * lead.Seconds())
	if free-ahead >= w.Low {
		t.Fatalf("test setup: growth %.0f B/s does not bring free below low within the lead", c.growth)
	}
	if want := w.High - (free - ahead); d.Reclaim != want {
		t.Errorf("Reclaim = %d, want high - (free - growth*lead) = %d", d.Reclaim, want)
	}
	// The horizon of a driver that says its reaction delay and active
	// interval is their sum: 20 ms + 80 ms is the same 100 ms.
	in.Lead, in.Reaction, in.ActiveInterval = 0, 20*time.Millisecond, 80*time.Millisecond
	c3 := *c
	c3.reclaiming = false
	if d3 := c3.Step(in); d3.Reclaim != d.Reclaim {
		t.Errorf("Reaction + ActiveInterval = Lead: Reclaim = %d, want %d", d3.Reclaim, d.Reclaim)
	}
	// The kernel's kswapd (no horizon) sleeps in the same state.
	in.Reaction, in.ActiveInterval = 0, 0
	c2 := NewController()
	if d := c2.Step(in); d.Reclaim != 0 {
		t.Errorf("Lead 0 reclaimed %d with free above low", d.Reclaim)
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
