package policy

import (
	"testing"
	"time"

	"github.com/memcgd/memcgd/memcg"
)

// Issue 7, items 4 and 6: the policy decides when to look again and at
// which thresholds the watcher reports the cgroup. Limits dirty_bytes 16M,
// dirty_background_bytes 8M: freerun 12 MiB, a 4 MiB gap to the limit, of
// which a quarter (1 MiB) may be dirtied unseen.
func TestWhenToLookAgain(t *testing.T) {
	const never = memcg.NoLimit
	limits := memcg.DirtyLimits{Background: 8 * mib, Limit: 16 * mib}
	tests := []struct {
		name      string
		limits    memcg.DirtyLimits
		dirty     uint64        // memory.stat dirty, constant over the steps
		dt        time.Duration // between steps
		deltas    []uint64      // bytes dirtied between successive steps
		tracker   bool
		noFreezer bool
		reaction  time.Duration

		nextLook     time.Duration
		active       bool
		dirtiedAbove uint64 // 0: not checked
	}{
		{name: "an idle cgroup is left to its watch: no NextLook, not active",
			dirty: 1 * mib, dt: 10 * ms, deltas: []uint64{0}, nextLook: 0, active: false, dirtiedAbove: never},
		{name: "tracker: an idle cgroup is reported when it has dirtied its way to the background threshold",
			dirty: 1 * mib, dt: 10 * ms, deltas: []uint64{0}, tracker: true, nextLook: 0, active: false, dirtiedAbove: 7 * mib},
		{name: "fallback: an idle cgroup holding dirty pages over half its background threshold is rechecked after RecheckInterval",
			dirty: 5 * mib, dt: 10 * ms, deltas: []uint64{0}, nextLook: RecheckInterval, active: false},
		{name: "tracker: no recheck, the tracker reports cached pages dirtied again 3 MiB before the background threshold",
			dirty: 5 * mib, dt: 10 * ms, deltas: []uint64{0}, tracker: true, nextLook: 0, active: false, dirtiedAbove: 3 * mib},
		{name: "dirty at the background threshold: active, looked at every ActiveInterval",
			dirty: 8 * mib, dt: 10 * ms, deltas: []uint64{0}, nextLook: 50 * ms, active: true},
		{name: "fallback: a writer at 100 MiB/s is looked at every 10 ms, the time it takes to dirty a quarter of the gap",
			dirty: 2 * mib, dt: 10 * ms, deltas: []uint64{1 * mib}, nextLook: (4 * mib / 4) * time.Second / (100 * mib), active: true},
		{name: "fallback: a writer at 1.5 GB/s is looked at every MinLook, the floor",
			dirty: 2 * mib, dt: 1 * ms, deltas: []uint64{1500000}, nextLook: 1 * ms, active: true},
		{name: "fallback: the interval follows a writer that speeds up at once",
			dirty: 2 * mib, dt: 10 * ms, deltas: []uint64{256 * 1024, 1 * mib}, nextLook: 10 * ms, active: true},
		{name: "fallback: a writer at 10 MiB/s cannot dirty a quarter of the gap within the active interval: left to its watch",
			dirty: 2 * mib, dt: 10 * ms, deltas: []uint64{100 * 1024}, nextLook: 0, active: false},
		{name: "fallback: a burst after a long idle interval (13 MiB in 1.2 s averages 11 MiB/s) dirtied more than a quarter of the gap unseen: looked at again after MinLook",
			dirty: 2 * mib, dt: 1200 * ms, deltas: []uint64{13 * mib}, nextLook: 1 * ms, active: true},
		{name: "fallback: back to events when the cgroup dirtied nothing since the last look",
			dirty: 2 * mib, dt: 10 * ms, deltas: []uint64{1 * mib, 0}, nextLook: 0, active: false},
		{name: "tracker: a writer at 100 MiB/s is not polled, the tracker reports it at the freeze level",
			dirty: 10 * mib, dt: 10 * ms, deltas: []uint64{1 * mib}, tracker: true, nextLook: 50 * ms, active: true, dirtiedAbove: 6 * mib},
		{name: "tracker: near the limit it still waits for a quarter of the gap",
			dirty: 15*mib + 512*1024, dt: 10 * ms, deltas: []uint64{0}, tracker: true, nextLook: 50 * ms, active: true, dirtiedAbove: 1 * mib},
		{name: "tracker: armed early by what the cgroup dirties within the reaction delay, on top of the freeze level's own anticipation",
			dirty: 10 * mib, dt: 10 * ms, deltas: []uint64{1 * mib}, tracker: true, reaction: 1 * ms, nextLook: 50 * ms, active: true,
			dirtiedAbove: 6*mib - 2*(100*mib/1000)},
		{name: "without a freezer a dirtying cgroup is not polled, and the tracker only watches the background threshold",
			dirty: 2 * mib, dt: 10 * ms, deltas: []uint64{1 * mib}, tracker: true, noFreezer: true, nextLook: 0, active: false, dirtiedAbove: 6 * mib},
		{name: "no dirty limits: no dirtied-bytes wake-up and no polling",
			limits: memcg.DirtyLimits{Background: never, Limit: never},
			dirty:  2 * mib, dt: 10 * ms, deltas: []uint64{1 * mib}, nextLook: 0, active: false, dirtiedAbove: never},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := tt.limits
			if lim == (memcg.DirtyLimits{}) {
				lim = limits
			}
			freezer := FreezerHeld
			if tt.noFreezer {
				freezer = FreezerNone
			}
			c := NewController()
			now, ctr := time.Unix(10, 0), uint64(0)
			var d Decision
			for _, delta := range append([]uint64{0}, tt.deltas...) {
				ctr += delta
				d = c.Step(Input{
					Now:            now,
					Stat:           memcg.Stat{Limit: 1 << 30, Usage: 64*mib + tt.dirty, File: 64*mib + tt.dirty, Dirty: tt.dirty, Counters: memcg.Counters{HasDirtied: true, DirtiedBytes: ctr}},
					Dirty:          lim,
					Tracker:        tt.tracker,
					Reaction:       tt.reaction,
					ActiveInterval: 50 * ms,
					Freezer:        freezer,
				})
				now = now.Add(tt.dt)
			}
			if d.NextLook != tt.nextLook || d.Active != tt.active {
				t.Errorf("NextLook %v Active %v, want %v %v (dirty rate %d B/s)", d.NextLook, d.Active, tt.nextLook, tt.active, c.DirtyRate())
			}
			rel := d.Wake.DirtiedAbove // absolute: the counter read plus the room
			if rel != never {
				rel -= ctr
			}
			if tt.dirtiedAbove != 0 && rel != tt.dirtiedAbove {
				t.Errorf("DirtiedAbove %d past the counter, want %d", rel, tt.dirtiedAbove)
			}
			if d.Active && d.Wake.UsageAbove != never {
				t.Errorf("active, but UsageAbove %d: an active cgroup is looked at anyway", d.Wake.UsageAbove)
			}
		})
	}
}

// An active cgroup's watch reports it at reclaim against its limit only
// where the userspace kswapd works for it: reclaim is the kswapd's cue to
// run again, and without the kswapd such a report would be a step that
// does nothing the next look does not. An idle cgroup is reported at
// reclaim either way.
func TestOnlyArmedWhileActiveWithoutTheKswapd(t *testing.T) {
	kswapd := memcg.Watermarks{Min: 1 * mib, Low: 2 * mib, High: 3 * mib}
	tests := []struct {
		name       string
		dirty      uint64
		watermarks memcg.Watermarks
		exempt     bool
		active     bool
		onlyArmed  bool
	}{
		{"active, no kswapd: reported at its thresholds only", 8 * mib, memcg.Watermarks{}, false, true, true},
		{"active, the kswapd on: reported at reclaim too", 8 * mib, kswapd, false, true, false},
		{"active, holding the daemon (no kswapd for it): thresholds only", 8 * mib, kswapd, true, true, true},
		{"idle, no kswapd: reported at reclaim", 1 * mib, memcg.Watermarks{}, false, false, false},
		{"idle, the kswapd on: reported at reclaim", 1 * mib, kswapd, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewController().Step(Input{
				Now:            time.Unix(10, 0),
				Stat:           memcg.Stat{Limit: 1 << 30, Usage: 64*mib + tt.dirty, File: 64*mib + tt.dirty, Dirty: tt.dirty, Counters: memcg.Counters{HasDirtied: true}},
				Dirty:          memcg.DirtyLimits{Background: 8 * mib, Limit: 16 * mib},
				Watermarks:     tt.watermarks,
				Exempt:         tt.exempt,
				Tracker:        true,
				ActiveInterval: 50 * ms,
				Freezer:        FreezerHeld,
			})
			if d.Active != tt.active || d.Wake.OnlyArmed != tt.onlyArmed {
				t.Errorf("Active %v, Wake.OnlyArmed %v; want %v, %v", d.Active, d.Wake.OnlyArmed, tt.active, tt.onlyArmed)
			}
		})
	}
}

func TestWakeAt(t *testing.T) {
	dl := memcg.DirtyLimits{Background: 8 * mib, Limit: 16 * mib}
	w := memcg.Watermarks{Min: 4 * mib, Low: 5 * mib, High: 6 * mib}
	const never = memcg.NoLimit
	tests := []struct {
		name    string
		s       memcg.Stat
		ahead   uint64
		tracker bool
		want    uint64
	}{
		{"the dirty background threshold is nearer: usage + (background - dirty)", memcg.Stat{Limit: 100 * mib, Usage: 10 * mib, Dirty: 2 * mib}, 0, false, 16 * mib},
		{"the low watermark is nearer: limit - low", memcg.Stat{Limit: 100 * mib, Usage: 90 * mib}, 0, false, 95 * mib},
		{"no limit: the dirty threshold only", memcg.Stat{Limit: never, Usage: 10 * mib}, 0, false, 18 * mib},
		{"kswapd wakes growth × horizon early, so does the watch", memcg.Stat{Limit: 100 * mib, Usage: 90 * mib}, mib / 2, false, 94*mib + mib/2},
		{"kswapd wakes at high_wmark at the earliest, where a run would end at once", memcg.Stat{Limit: 100 * mib, Usage: 90 * mib}, 3 * mib, false, 94 * mib},
		{"past the background threshold only the watermark wakes", memcg.Stat{Limit: 100 * mib, Usage: 10 * mib, Dirty: 9 * mib}, 0, false, 95 * mib},
		{"tracker: the dirty term is the tracker's DirtiedAbove; the watermark alone wakes", memcg.Stat{Limit: 100 * mib, Usage: 10 * mib, Dirty: 2 * mib}, 0, true, 95 * mib},
		{"tracker: the watermark keeps its anticipation", memcg.Stat{Limit: 100 * mib, Usage: 90 * mib}, mib / 2, true, 94*mib + mib/2},
		{"tracker, no limit: no usage watch at all", memcg.Stat{Limit: never, Usage: 10 * mib, Dirty: 2 * mib}, 0, true, never},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := wakeAt(tt.s, dl, w, tt.ahead, tt.tracker); got != tt.want {
				t.Errorf("wakeAt = %d KiB, want %d KiB", got>>10, tt.want>>10)
			}
		})
	}
	t.Run("watermarks disabled and a tracker: no usage watch", func(t *testing.T) {
		s := memcg.Stat{Limit: 100 * mib, Usage: 10 * mib, Dirty: 2 * mib}
		if got := wakeAt(s, dl, memcg.Watermarks{}, 0, true); got != never {
			t.Errorf("wakeAt = %d MiB, want NoLimit", got/mib)
		}
	})
}

// closedLoopReaction is the reaction delay closedLoopSteps tells the
// controller.
const closedLoopReaction = ms

// closedLoopSteps drives c as the closed loop's driver would, for a cgroup
// with dirty_background_bytes 8M, dirty_bytes 16M and a 100 MiB limit,
// counting dirtied bytes (with the tracker or not): each step advances the
// clock by dt, the counter by dirtied, observes dirty, and holds the
// freezer as the decision says. frozen is the freezer's state.
func closedLoopSteps(c *Controller, tracker bool) (step func(dt time.Duration, dirtied, dirty uint64) Decision, frozen *bool) {
	lim := memcg.DirtyLimits{Background: 8 * mib, Limit: 16 * mib}
	now, ctr, held := time.Unix(10, 0), uint64(0), false
	step = func(dt time.Duration, dirtied, dirty uint64) Decision {
		now, ctr = now.Add(dt), ctr+dirtied
		d := c.Step(Input{Now: now, Dirty: lim, Tracker: tracker, Reaction: closedLoopReaction, ActiveInterval: 50 * ms,
			Freezer: FreezerHeld, Frozen: held,
			Stat: memcg.Stat{Limit: 100 * mib, Usage: 64*mib + dirty, File: 64*mib + dirty, Dirty: dirty,
				Counters: memcg.Counters{HasDirtied: true, DirtiedBytes: ctr}}})
		switch d.Throttle {
		case ThrottleFreeze:
			held = true
		case ThrottleThaw:
			held = false
		}
		return d
	}
	return step, &held
}

// Issue 7, item 4: within a throttle episode, a look that saw nothing
// dirtied leaves the fallback interval in force. Nested managed cgroups
// are frozen by each other's episodes: the writer's tasks were stopped by
// its parent's freeze while its own controller had thawed it, and a
// "quiet" look then left a 1.5 GB/s writer to the 50 ms active interval
// (on the v1 host it reached its 100 MiB memory limit in it). Outside an
// episode, quiet still means back to events (TestWhenToLookAgain).
func TestQuietLookWithinEpisode(t *testing.T) {
	c := NewController()
	step, _ := closedLoopSteps(c, false)
	// A 1.5 GB/s writer, frozen at the limit and drained to freerun.
	step(0, 0, 2*mib)
	step(ms, 1500000, 4*mib)
	if d := step(ms, 15*mib, 17*mib); d.Throttle != ThrottleFreeze {
		t.Fatalf("at 17 MiB: %v, want a freeze", d.Throttle)
	}
	step(ms, 0, 15*mib)
	if d := step(ms, 0, 10*mib); d.Throttle != ThrottleThaw || d.NextLook != MinLook {
		t.Fatalf("drained to 10 MiB: %v, NextLook %v; want a thaw and a look after MinLook", d.Throttle, d.NextLook)
	}
	// Thawed, but stopped by an ancestor's freeze: nothing dirtied.
	for i := range 3 {
		d := step(2*ms, 0, 6*mib)
		if !d.Episode || d.NextLook != MinLook {
			t.Errorf("look %d after the thaw, nothing dirtied: Episode %v, NextLook %v; want the episode open and a look after MinLook",
				i+1, d.Episode, d.NextLook)
		}
	}
}

// With the tracker, a cgroup thawed within an episode is looked at again
// by the time it would reach the freeze level at its rate, the device
// writing nothing: the tracker's wake-up is armed for that moment, but
// its delivery can come late (docs/lab/2026-11-30-results.md, "At e2413b8"), and the
// look is the safety net. Outside an episode the tracker alone watches a
// writer (TestWhenToLookAgain).
func TestTrackerLooksAgainAfterAThaw(t *testing.T) {
	c := NewController()
	step, frozen := closedLoopSteps(c, true)
	const reaction = closedLoopReaction
	// A writer at 2 MiB per 10 ms (about 210 MB/s), frozen past the
	// limit, then drained to 10 MiB.
	dirty := uint64(2 * mib)
	step(0, 0, dirty)
	for dirty < 17*mib {
		dirty += 2 * mib
		step(10*ms, 2*mib, dirty)
	}
	if !*frozen {
		t.Fatalf("at %d MiB: not frozen", dirty/mib)
	}
	d := step(ms, 0, 10*mib)
	if d.Throttle != ThrottleThaw {
		t.Fatalf("drained to 10 MiB: %v, want a thaw", d.Throttle)
	}
	rate := float64(c.DirtyRate())
	// The freeze level: the limit less what the writer dirties within
	// the reaction delay (it is above the setpoint, 14 MiB, here).
	level := float64(16*mib) - rate*reaction.Seconds()
	want := time.Duration((level - 10*mib) / rate * float64(time.Second))
	if d.NextLook < want-time.Millisecond || d.NextLook > want+time.Millisecond || d.NextLook >= 50*ms {
		t.Errorf("after the thaw at 10 MiB: NextLook %v, want about %v, the time to dirty the %.1f MiB to the freeze level at %.0f MB/s",
			d.NextLook, want, (level-10*mib)/mib, rate/1e6)
	}
	if !d.Episode || d.Wake.DirtiedAbove == memcg.NoLimit {
		t.Errorf("after the thaw: Episode %v, DirtiedAbove %d; want the episode open and the tracker armed too", d.Episode, d.Wake.DirtiedAbove)
	}
}
