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
	holdFor  time.Duration
	episode  bool
	paused   time.Duration
	nextLook time.Duration // -1: not checked
	bw       uint64        // the bandwidth estimate after the step; 0: not checked
}

func runThrottle(t *testing.T, reaction time.Duration, steps []throttleStep) {
	t.Helper()
	c := NewController()
	t0 := time.Unix(100, 0)
	for i, st := range steps {
		d := c.Step(Input{
			Now: t0.Add(st.at),
			Stat: memcg.Stat{Limit: 1 << 30, Usage: 64*mib + st.dirty, File: 64*mib + st.dirty, Dirty: st.dirty,
				Counters: memcg.Counters{HasDirtied: true, DirtiedBytes: st.dirtied}},
			Dirty:          memcg.DirtyLimits{Background: 8 * mib, Limit: 16 * mib},
			Reaction:       reaction,
			ActiveInterval: 50 * time.Millisecond,
			Freezer:        st.freezer,
		})
		if d.Throttle != st.throttle || d.HoldFor != st.holdFor || d.Episode != st.episode || d.Paused != st.paused {
			t.Errorf("step %d (%v, dirty %.2f MiB): Throttle %v HoldFor %v Episode %v Paused %v, want %v %v %v %v",
				i, st.at, float64(st.dirty)/mib, d.Throttle, d.HoldFor, d.Episode, d.Paused, st.throttle, st.holdFor, st.episode, st.paused)
		}
		if st.nextLook >= 0 && d.NextLook != st.nextLook {
			t.Errorf("step %d (%v): NextLook %v, want %v", i, st.at, d.NextLook, st.nextLook)
		}
		if st.bw != 0 && c.WriteBandwidth() != st.bw {
			t.Errorf("step %d (%v): bandwidth %d, want %d", i, st.at, c.WriteBandwidth(), st.bw)
		}
		if d.Throttle != ThrottleNone && d.Why&ReasonThrottle == 0 {
			t.Errorf("step %d: Why = %v, want throttle", i, d.Why)
		}
		if st.throttle == ThrottleFreeze || st.throttle == ThrottleHold {
			if !d.Active || d.Pause != 0 {
				t.Errorf("step %d: frozen but Active %v, Pause %v", i, d.Active, d.Pause)
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
				{at: 1 * ms, dirty: 16 * mib, dirtied: 6 * mib, freezer: H, throttle: ThrottleFreeze, holdFor: MaxPause, episode: true, nextLook: MinLook},
				{at: 2 * ms, dirty: 15*mib + 800*1024, dirtied: 6 * mib, freezer: H, throttle: ThrottleHold, holdFor: MaxPause - 1*ms, episode: true, nextLook: MinLook},
				{at: 10 * ms, dirty: 14 * mib, dirtied: 6 * mib, freezer: H, throttle: ThrottleHold, holdFor: MaxPause - 9*ms, episode: true, nextLook: MinLook},
				// 4 MiB drained in 20 ms: 200 MiB/s, not INIT_BW's 100
				{at: 21 * ms, dirty: 12 * mib, dirtied: 6 * mib, freezer: H, throttle: ThrottleThaw, episode: true, paused: 20 * ms, nextLook: -1, bw: 4 * mib * 50},
			},
		},
		{
			name: "once the device is measured, a frozen cgroup is looked at halfway to the drain's expected end, at least MinLook",
			steps: []throttleStep{
				{at: 0, dirty: 10 * mib, freezer: H, nextLook: -1},
				{at: 1 * ms, dirty: 16 * mib, dirtied: 6 * mib, freezer: H, throttle: ThrottleFreeze, holdFor: MaxPause, episode: true, nextLook: MinLook},
				{at: 21 * ms, dirty: 12 * mib, dirtied: 6 * mib, freezer: H, throttle: ThrottleThaw, episode: true, paused: 20 * ms, nextLook: -1, bw: 200 * mib},
				// 4 MiB over freerun at 200 MiB/s: 20 ms to go, look in 10
				{at: 30 * ms, dirty: 16 * mib, dirtied: 10*mib + 1800*1024, freezer: H, throttle: ThrottleFreeze, holdFor: MaxPause, episode: true, nextLook: 10 * ms},
				// 0.2 MiB to go: 1 ms, half of it is below MinLook
				{at: 49 * ms, dirty: 12*mib + 200*1024, dirtied: 10*mib + 1800*1024, freezer: H, throttle: ThrottleHold, holdFor: MaxPause - 19*ms, episode: true, nextLook: MinLook},
			},
		},
		{
			name: "MAX_PAUSE: a freeze ends after 200 ms even above freerun, and the cgroup is frozen again at the next look if still at the limit",
			steps: []throttleStep{
				{at: 0, dirty: 10 * mib, freezer: H, nextLook: -1},
				{at: 1 * ms, dirty: 17 * mib, dirtied: 7 * mib, freezer: H, throttle: ThrottleFreeze, holdFor: MaxPause, episode: true, nextLook: -1},
				{at: 150 * ms, dirty: 16 * mib, dirtied: 7 * mib, freezer: H, throttle: ThrottleHold, holdFor: 51 * ms, episode: true, nextLook: -1},
				// a stalled device: 1 MiB in 200 ms; the bandwidth is learnt from it
				{at: 201 * ms, dirty: 16 * mib, dirtied: 7 * mib, freezer: H, throttle: ThrottleThaw, episode: true, paused: MaxPause, nextLook: -1, bw: 5 * mib},
				{at: 202 * ms, dirty: 16*mib + 512*1024, dirtied: 7*mib + 512*1024, freezer: H, throttle: ThrottleFreeze, holdFor: MaxPause, episode: true, nextLook: -1},
			},
		},
		{
			name: "a drain of nothing teaches nothing: INIT_BW stays",
			steps: []throttleStep{
				{at: 0, dirty: 10 * mib, freezer: H, nextLook: -1},
				{at: 1 * ms, dirty: 16 * mib, dirtied: 6 * mib, freezer: H, throttle: ThrottleFreeze, holdFor: MaxPause, episode: true, nextLook: -1},
				{at: 201 * ms, dirty: 16 * mib, dirtied: 6 * mib, freezer: H, throttle: ThrottleThaw, episode: true, paused: MaxPause, nextLook: -1, bw: InitBW},
			},
		},
		{
			name: "one episode per writer: a refreeze within EpisodeLinger of a thaw continues it; a second thawed below the limit ends it",
			steps: []throttleStep{
				{at: 0, dirty: 10 * mib, freezer: H, nextLook: -1},
				{at: 1 * ms, dirty: 16 * mib, dirtied: 6 * mib, freezer: H, throttle: ThrottleFreeze, holdFor: MaxPause, episode: true, nextLook: -1},
				{at: 21 * ms, dirty: 12 * mib, dirtied: 6 * mib, freezer: H, throttle: ThrottleThaw, episode: true, paused: 20 * ms, nextLook: -1},
				// thawed, the open episode alone keeps the cgroup looked at
				{at: 500 * ms, dirty: 11 * mib, dirtied: 6 * mib, freezer: H, episode: true, nextLook: 50 * ms},
				{at: 900 * ms, dirty: 16 * mib, dirtied: 11 * mib, freezer: H, throttle: ThrottleFreeze, holdFor: MaxPause, episode: true, nextLook: -1},
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
				{at: 5 * ms, dirty: 15 * mib, dirtied: 5 * mib * 1024 / 1000, freezer: H, throttle: ThrottleFreeze, holdFor: MaxPause, episode: true, nextLook: -1},
			},
		},
		{
			name:     "the reaction delay: thaw when the device would bring the cgroup to freerun before the next step could (200 MiB/s × 1 ms = 0.2 MiB early)",
			reaction: 1 * ms,
			steps: []throttleStep{
				{at: 0, dirty: 16 * mib, freezer: H, throttle: ThrottleFreeze, holdFor: MaxPause, episode: true, nextLook: -1},
				{at: 20 * ms, dirty: 12 * mib, freezer: H, throttle: ThrottleThaw, episode: true, paused: 20 * ms, nextLook: -1, bw: 200 * mib},
				{at: 30 * ms, dirty: 16 * mib, dirtied: 4 * mib, freezer: H, throttle: ThrottleFreeze, holdFor: MaxPause, episode: true, nextLook: -1},
				{at: 48 * ms, dirty: 12*mib + 209715 + 4096, dirtied: 4 * mib, freezer: H, throttle: ThrottleHold, holdFor: MaxPause - 18*ms, episode: true, nextLook: -1},
				{at: 49 * ms, dirty: 12*mib + 209715, dirtied: 4 * mib, freezer: H, throttle: ThrottleThaw, episode: true, paused: 19 * ms, nextLook: -1},
			},
		},
		{
			name: "a driver that loses its freezer mid-freeze is told to thaw, and the episode ends",
			steps: []throttleStep{
				{at: 0, dirty: 10 * mib, freezer: H, nextLook: -1},
				{at: 1 * ms, dirty: 16 * mib, dirtied: 6 * mib, freezer: H, throttle: ThrottleFreeze, holdFor: MaxPause, episode: true, nextLook: -1},
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

func TestFreezerStatesNothingWithoutAHeldFreezer(t *testing.T) {
	// A driver that cannot hold a freeze gets the open-loop pause of
	// balance_dirty_pages() and no freezer action; it steps the cgroup
	// again when the pause ends. freerun 12 MiB: 4 MiB at INIT_BW is 40 ms.
	c := NewController()
	in := Input{Now: time.Unix(1, 0), Stat: memcg.Stat{Limit: 1 << 30, Dirty: 16 * mib}, Dirty: memcg.DirtyLimits{Background: 8 * mib, Limit: 16 * mib}}
	c.Step(in)
	in.Now = in.Now.Add(100 * ms)
	d := c.Step(in)
	if d.Pause != 40*ms || d.Throttle != ThrottleNone || d.Episode || d.NextLook != d.Pause || !d.Active {
		t.Errorf("FreezerTimed: Pause %v Throttle %v Episode %v NextLook %v Active %v, want a 40ms pause and a look when it ends", d.Pause, d.Throttle, d.Episode, d.NextLook, d.Active)
	}
}
