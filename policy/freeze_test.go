package policy

import (
	"testing"
	"time"

	"github.com/memcgd/memcgd/memcg"
)

// throttleStep is one observation of a closed-loop scenario and what the
// decision must say. The limits are dirty_bytes 16M, dirty_background_bytes
// 8M: freerun 12 MiB, setpoint 14 MiB.
type throttleStep struct {
	at       time.Duration // since the scenario's start
	dirty    uint64        // dirty+writeback, all of it dirty
	dirtied  uint64        // the tasks' dirtied-bytes counter
	freezer  Freezer
	throttle Throttle
	holdFor  time.Duration // -1: not checked
	episode  bool
	paused   time.Duration
	nextLook time.Duration // -1: not checked
	runFor   time.Duration // -1: not checked
	bw       uint64        // the bandwidth estimate after the step; 0: not checked
}

// throttleDriver carries out decisions as the contract says: Freeze and
// Hold freeze until HoldFor, then thaw and, with RunFor, freeze again
// RunFor later; a thaw with RunFor freezes again RunFor later; a freeze of
// its own lasts MaxPause at most. Every decision replaces the deadlines.
type throttleDriver struct {
	frozen           bool
	thawBy, runUntil time.Time
	runAfter         time.Duration
}

// at advances the driver's own timers to now and says whether it holds
// the cgroup frozen then.
// Its timers may have fired several times since the last decision (a
// freeze at RunFor and the thaw MaxPause later), so it replays them in
// order.
func (dr *throttleDriver) at(now time.Time) bool {
	for {
		switch {
		case dr.frozen && !dr.thawBy.IsZero() && now.After(dr.thawBy):
			dr.frozen = false
			if dr.runAfter > 0 {
				dr.runUntil = dr.thawBy.Add(dr.runAfter)
			}
			dr.thawBy, dr.runAfter = time.Time{}, 0
		case !dr.frozen && !dr.runUntil.IsZero() && !now.Before(dr.runUntil):
			dr.frozen, dr.thawBy, dr.runUntil = true, dr.runUntil.Add(MaxPause), time.Time{}
		default:
			return dr.frozen
		}
	}
}

func (dr *throttleDriver) carry(now time.Time, d Decision) {
	switch d.Throttle {
	case ThrottleFreeze, ThrottleHold:
		dr.frozen = true
	case ThrottleThaw:
		dr.frozen = false
	}
	dr.thawBy, dr.runUntil, dr.runAfter = time.Time{}, time.Time{}, 0
	switch {
	case dr.frozen:
		dr.thawBy, dr.runAfter = now.Add(d.HoldFor), d.RunFor
	case d.RunFor > 0:
		dr.runUntil = now.Add(d.RunFor)
	}
}

// scenarioInput is an observation in the throttle scenarios: 64 MiB of
// clean page cache plus dirty and writeback bytes, the tasks' dirtied
// counter, dirty_bytes 16M and dirty_background_bytes 8M.
func scenarioInput(now time.Time, dirty, writeback, dirtied uint64) Input {
	file := 64*mib + dirty + writeback
	return Input{
		Now: now,
		Stat: memcg.Stat{Limit: 1 << 30, Usage: file, File: file, Dirty: dirty, Writeback: writeback,
			Counters: memcg.Counters{HasDirtied: true, DirtiedBytes: dirtied}},
		Dirty: memcg.DirtyLimits{Background: 8 * mib, Limit: 16 * mib},
	}
}

func runThrottle(t *testing.T, reaction time.Duration, steps []throttleStep) {
	t.Helper()
	c := NewController()
	var dr throttleDriver
	t0 := time.Unix(100, 0)
	for i, st := range steps {
		now := t0.Add(st.at)
		in := scenarioInput(now, st.dirty, 0, st.dirtied)
		in.Reaction, in.ActiveInterval = reaction, 50*time.Millisecond
		in.Freezer, in.Frozen = st.freezer, dr.at(now)
		d := c.Step(in)
		dr.carry(now, d)
		if d.Throttle != st.throttle || st.holdFor >= 0 && d.HoldFor != st.holdFor || d.Episode != st.episode || d.Paused != st.paused {
			t.Errorf("step %d (%v, dirty %.2f MiB): Throttle %v HoldFor %v Episode %v Paused %v, want %v %v %v %v",
				i, st.at, float64(st.dirty)/mib, d.Throttle, d.HoldFor, d.Episode, d.Paused, st.throttle, st.holdFor, st.episode, st.paused)
		}
		if st.nextLook >= 0 && d.NextLook != st.nextLook {
			t.Errorf("step %d (%v): NextLook %v, want %v", i, st.at, d.NextLook, st.nextLook)
		}
		if st.runFor >= 0 && d.RunFor != st.runFor {
			t.Errorf("step %d (%v): RunFor %v, want %v", i, st.at, d.RunFor, st.runFor)
		}
		if st.bw != 0 && c.WriteBandwidth() != st.bw {
			t.Errorf("step %d (%v): bandwidth %d, want %d", i, st.at, c.WriteBandwidth(), st.bw)
		}
		if d.Throttle != ThrottleNone && d.Why&ReasonThrottle == 0 {
			t.Errorf("step %d: Why = %v, want throttle", i, d.Why)
		}
		if st.throttle == ThrottleFreeze || st.throttle == ThrottleHold {
			if !d.Active {
				t.Errorf("step %d: frozen but not Active", i)
			}
		}
	}
}

const ms = time.Millisecond

func TestClosedLoopThrottle(t *testing.T) {
	H := FreezerHeld
	tests := []struct {
		name     string
		reaction time.Duration
		steps    []throttleStep
	}{
		{
			name: "issue 7: freeze at the limit, hold at 1 ms resolution, thaw at freerun; the pause is the measured drain and the first drain replaces INIT_BW",
			steps: []throttleStep{
				{at: 0, dirty: 10 * mib, freezer: H, nextLook: -1},
				{at: 1 * ms, dirty: 16 * mib, dirtied: 6 * mib, freezer: H, runFor: -1, throttle: ThrottleFreeze, holdFor: MaxPause, episode: true, nextLook: MinLook},
				{at: 2 * ms, dirty: 15*mib + 800*1024, dirtied: 6 * mib, freezer: H, runFor: -1, throttle: ThrottleHold, holdFor: MaxPause - 1*ms, episode: true, nextLook: MinLook},
				{at: 10 * ms, dirty: 14 * mib, dirtied: 6 * mib, freezer: H, runFor: -1, throttle: ThrottleHold, holdFor: MaxPause - 9*ms, episode: true, nextLook: MinLook},
				// 4 MiB drained in 20 ms: 200 MiB/s, not INIT_BW's 100. A
				// writer at 6 GiB/s refills the 4 MiB in 0.7 ms: it may run
				// for the floor, MinLook.
				{at: 21 * ms, dirty: 12 * mib, dirtied: 6 * mib, freezer: H, throttle: ThrottleThaw, episode: true, paused: 20 * ms, nextLook: -1, runFor: MinLook, bw: 4 * mib * 50},
			},
		},
		{
			name: "RunFor: a thawed writer runs as long as it takes to dirty its way back to the limit (1000 MiB/s in, 200 out: 4 MiB in 5 ms); the driver refreezes it then, and the step finds it frozen and looks again after MinLook (a device drains in bursts)",
			steps: []throttleStep{
				{at: 0, dirty: 10 * mib, freezer: H, nextLook: -1},
				{at: 4 * ms, dirty: 16 * mib, dirtied: 4 * mib, freezer: H, runFor: -1, throttle: ThrottleFreeze, holdFor: MaxPause, episode: true, nextLook: MinLook},
				{at: 24 * ms, dirty: 12 * mib, dirtied: 4 * mib, freezer: H, throttle: ThrottleThaw, episode: true, paused: 20 * ms, nextLook: -1, runFor: 5 * ms, bw: 200 * mib},
				// 4 MiB over freerun at 200 MiB/s: held no longer than the
				// 20 ms drain, then 5 ms of run again; looked at every
				// MinLook meanwhile, since the drain may come at once
				{at: 29 * ms, dirty: 16 * mib, dirtied: 9 * mib, freezer: H, runFor: 5 * ms, throttle: ThrottleHold, holdFor: 20 * ms, episode: true, nextLook: MinLook},
				// 0.2 MiB to go: 1 ms
				{at: 48 * ms, dirty: 12*mib + 200*1024, dirtied: 9 * mib, freezer: H, runFor: -1, throttle: ThrottleHold, holdFor: MinLook, episode: true, nextLook: MinLook},
				// the drain counts from the driver's refreeze
				{at: 49 * ms, dirty: 12 * mib, dirtied: 9 * mib, freezer: H, throttle: ThrottleThaw, episode: true, paused: 20 * ms, nextLook: -1, runFor: 5 * ms, bw: 200 * mib},
			},
		},
		{
			name: "MAX_PAUSE: a freeze ends after 200 ms even above freerun, and the driver freezes the cgroup again after MinLook, as the kernel sleeps MAX_PAUSE again while a task is over the limit",
			steps: []throttleStep{
				{at: 0, dirty: 10 * mib, freezer: H, nextLook: -1},
				{at: 1 * ms, dirty: 17 * mib, dirtied: 7 * mib, freezer: H, runFor: -1, throttle: ThrottleFreeze, holdFor: MaxPause, episode: true, nextLook: -1},
				{at: 150 * ms, dirty: 16 * mib, dirtied: 7 * mib, freezer: H, runFor: -1, throttle: ThrottleHold, holdFor: 51 * ms, episode: true, nextLook: -1},
				// a stalled device: 1 MiB in 200 ms; the bandwidth is learnt from it
				{at: 201 * ms, dirty: 16 * mib, dirtied: 7 * mib, freezer: H, throttle: ThrottleThaw, episode: true, paused: MaxPause, nextLook: -1, runFor: MinLook, bw: 5 * mib},
				{at: 202 * ms, dirty: 16*mib + 512*1024, dirtied: 7*mib + 512*1024, freezer: H, runFor: -1, throttle: ThrottleHold, holdFor: MaxPause, episode: true, nextLook: -1},
			},
		},
		{
			name: "a drain of nothing teaches nothing: INIT_BW stays",
			steps: []throttleStep{
				{at: 0, dirty: 10 * mib, freezer: H, nextLook: -1},
				{at: 1 * ms, dirty: 16 * mib, dirtied: 6 * mib, freezer: H, runFor: -1, throttle: ThrottleFreeze, holdFor: MaxPause, episode: true, nextLook: -1},
				{at: 201 * ms, dirty: 16 * mib, dirtied: 6 * mib, freezer: H, throttle: ThrottleThaw, episode: true, paused: MaxPause, nextLook: -1, runFor: MinLook, bw: InitBW},
			},
		},
		{
			name: "one episode per writer: a refreeze within EpisodeLinger of a thaw continues it; a second thawed below the limit ends it",
			steps: []throttleStep{
				// 60 MiB/s: slower than the device, so no RunFor
				{at: 0, dirty: 10 * mib, freezer: H, nextLook: -1},
				{at: 100 * ms, dirty: 16 * mib, dirtied: 6 * mib, freezer: H, runFor: -1, throttle: ThrottleFreeze, holdFor: MaxPause, episode: true, nextLook: -1},
				{at: 120 * ms, dirty: 12 * mib, dirtied: 6 * mib, freezer: H, throttle: ThrottleThaw, episode: true, paused: 20 * ms, nextLook: -1},
				// thawed and nothing dirtied, but within an episode that
				// does not make the cgroup quiet (TestQuietLookWithinEpisode):
				// the fallback interval follows the rate as it decays over
				// rateWindow, 60 MiB/s × (1 − 380/1000) = 37.2 MiB/s, at
				// which a quarter of the gap (1 MiB) takes 1/37.2 s
				{at: 500 * ms, dirty: 11 * mib, dirtied: 6 * mib, freezer: H, episode: true, nextLook: time.Second * 10 / 372},
				{at: 900 * ms, dirty: 16 * mib, dirtied: 11 * mib, freezer: H, runFor: -1, throttle: ThrottleFreeze, holdFor: -1, episode: true, nextLook: -1},
				{at: 920 * ms, dirty: 12 * mib, dirtied: 11 * mib, freezer: H, throttle: ThrottleThaw, episode: true, paused: 20 * ms, nextLook: -1},
				// the linger runs out before the active interval would look
				{at: 1900 * ms, dirty: 11 * mib, dirtied: 11 * mib, freezer: H, episode: true, nextLook: 20 * ms},
				{at: 1920 * ms, dirty: 11 * mib, dirtied: 11 * mib, freezer: H, episode: false, nextLook: -1},
			},
		},
		{
			name: "below the limit, whatever the rate, nothing is frozen without a reaction delay",
			steps: []throttleStep{
				{at: 0, dirty: 10 * mib, freezer: H, nextLook: -1},
				{at: 5 * ms, dirty: 15 * mib, dirtied: 5 * mib, freezer: H, nextLook: -1},
			},
		},
		{
			name:     "the reaction delay: freeze when the cgroup would reach the limit before the next step could (1 GiB/s × 1 ms = 1 MiB early)",
			reaction: 1 * ms,
			steps: []throttleStep{
				{at: 0, dirty: 10 * mib, freezer: H, nextLook: -1},
				{at: 5 * ms, dirty: 15 * mib, dirtied: 5 * mib * 1024 / 1000, freezer: H, runFor: -1, throttle: ThrottleFreeze, holdFor: MaxPause, episode: true, nextLook: -1},
			},
		},
		{
			name:     "the reaction delay: thaw when the device would bring the cgroup to freerun before the next step could (200 MiB/s × 1 ms = 0.2 MiB early)",
			reaction: 1 * ms,
			steps: []throttleStep{
				{at: 0, dirty: 16 * mib, freezer: H, runFor: -1, throttle: ThrottleFreeze, holdFor: MaxPause, episode: true, nextLook: -1},
				{at: 20 * ms, dirty: 12 * mib, freezer: H, throttle: ThrottleThaw, episode: true, paused: 20 * ms, nextLook: -1, bw: 200 * mib},
				// held no longer than the device takes to 12.2 MiB: 19 ms
				{at: 30 * ms, dirty: 16 * mib, dirtied: 4 * mib, freezer: H, runFor: -1, throttle: ThrottleFreeze, holdFor: 19 * ms, episode: true, nextLook: -1},
				// the drain is due at once, but the timer waits for the
				// next look and its reaction: a timer at MinLook raced the
				// look, and thawed a cgroup whose batch had not completed
				{at: 48 * ms, dirty: 12*mib + 209715 + 4096, dirtied: 4 * mib, freezer: H, runFor: -1, throttle: ThrottleHold, holdFor: MinLook + 1*ms, episode: true, nextLook: -1},
				{at: 49 * ms, dirty: 12*mib + 209715, dirtied: 4 * mib, freezer: H, throttle: ThrottleThaw, episode: true, paused: 19 * ms, nextLook: -1, runFor: -1},
			},
		},
		{
			name: "a driver that loses its freezer mid-freeze is told to thaw, and the episode ends",
			steps: []throttleStep{
				{at: 0, dirty: 10 * mib, freezer: H, nextLook: -1},
				{at: 1 * ms, dirty: 16 * mib, dirtied: 6 * mib, freezer: H, runFor: -1, throttle: ThrottleFreeze, holdFor: MaxPause, episode: true, nextLook: -1},
				{at: 2 * ms, dirty: 16 * mib, dirtied: 6 * mib, freezer: FreezerNone, throttle: ThrottleThaw, paused: 1 * ms, nextLook: -1},
			},
		},
		{
			name: "without a freezer nothing is frozen",
			steps: []throttleStep{
				{at: 0, dirty: 10 * mib, freezer: FreezerNone, nextLook: -1},
				{at: 1 * ms, dirty: 17 * mib, dirtied: 7 * mib, freezer: FreezerNone, nextLook: -1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runThrottle(t, tt.reaction, tt.steps) })
	}
}

func TestLaterDrainsAreAveragedAsTheKernelAverages(t *testing.T) {
	// After the first drain (200 MiB/s), a 40 ms drain at 100 MiB/s is
	// folded in at 40/4096 weight (wb_update_write_bandwidth); the second
	// stage leaves avg where it is, since bw moved towards it.
	b := newBandwidth()
	b.drained(4*mib, 20*ms)
	b.drained(4*mib, 40*ms)
	w := 40.0 / 4096
	if want := 100*mib*w + 200*mib*(1-w); b.bw < want*0.9999 || b.bw > want*1.0001 {
		t.Errorf("write_bandwidth %.0f, want %.0f", b.bw, want)
	}
	if b.avg != 200*mib {
		t.Errorf("avg_write_bandwidth %.0f, want %d", b.avg, 200*mib)
	}
}

func TestTheDriversWordOnTheFreezerWins(t *testing.T) {
	limits := memcg.DirtyLimits{Background: 8 * mib, Limit: 16 * mib}
	in := func(at time.Duration, dirty uint64, frozen bool) Input {
		return Input{Now: time.Unix(100, 0).Add(at), Dirty: limits, Freezer: FreezerHeld, Frozen: frozen, ActiveInterval: 50 * ms,
			Stat: memcg.Stat{Limit: 1 << 30, Usage: 64*mib + dirty, File: 64*mib + dirty, Dirty: dirty}}
	}
	t.Run("a freeze that did not take is asked for again", func(t *testing.T) {
		c := NewController()
		c.Step(in(0, 10*mib, false))
		if d := c.Step(in(1*ms, 16*mib, false)); d.Throttle != ThrottleFreeze {
			t.Fatalf("at the limit: %v, want freeze", d.Throttle)
		}
		if d := c.Step(in(2*ms, 17*mib, false)); d.Throttle != ThrottleFreeze || !d.Episode {
			t.Errorf("the driver says the freeze did not take: %v (episode %v), want freeze again", d.Throttle, d.Episode)
		}
	})
	t.Run("a cgroup frozen unbeknown counts as frozen since the last observation, within MaxPause", func(t *testing.T) {
		c := NewController()
		c.Step(in(0, 10*mib, false))
		d := c.Step(in(30*ms, 15*mib, true))
		if d.Throttle != ThrottleHold || !d.Episode || d.HoldFor != MaxPause-30*ms {
			t.Errorf("driver says frozen: %v HoldFor %v episode %v, want hold for %v in an episode", d.Throttle, d.HoldFor, d.Episode, MaxPause-30*ms)
		}
	})
}

// HoldFor is the driver's deadline for a late step, so it never runs out
// before the next look (MinLook while frozen) and the driver's reaction,
// up to MinLook more: a device that completes writeback in batches is
// often behind the drain the average bandwidth predicts. A slow driver is
// not waited for, and MaxPause still bounds the freeze.
func TestHoldForWaitsForTheNextLook(t *testing.T) {
	const ms, mib = time.Millisecond, uint64(1 << 20)
	dl := memcg.DirtyLimits{Limit: 16 * mib, Background: 8 * mib} // thaw level 12 MiB plus bw × Reaction
	for _, tc := range []struct {
		name     string
		reaction time.Duration
		dirty    uint64
		left     time.Duration
		want     time.Duration
	}{
		{"a drain due at once, no reaction delay: the next look", 0, 12 * mib, MaxPause, MinLook},
		{"a drain due at once, 1 ms reaction: the next look and its reaction", ms, 12 * mib, MaxPause, 2 * ms},
		{"a drain due at once, a slow driver (50 ms): not waited for", 50 * ms, 12 * mib, MaxPause, 2 * ms},
		{"a drain longer than the look: the drain (4 MiB above the thaw level at 400 MiB/s)", ms, 16*mib + 419430, MaxPause, 10 * ms},
		{"what is left of MaxPause bounds it", ms, 16*mib + 419430, 3 * ms / 2, 3 * ms / 2},
		{"and MinLook bounds that", ms, 16*mib + 419430, ms / 2, MinLook},
	} {
		c := Controller{domainLimit: dl.Limit, bw: bandwidth{bw: 400 * float64(mib), avg: 400 * float64(mib), drainMeasured: true}}
		in := Input{Dirty: dl, Reaction: tc.reaction}
		if got := c.holdFor(in, tc.dirty, tc.left); got != tc.want {
			t.Errorf("%s: holdFor %v, want %v (thaw level %.2f MiB)", tc.name, got, tc.want, float64(c.thawLevel(in))/float64(mib))
		}
	}
}
