package policy

import (
	"testing"
	"time"

	"github.com/memcgd/memcgd/memcg"
)

func TestPaceFor(t *testing.T) {
	for _, tt := range []struct {
		name  string
		share float64
		want  Pacing
	}{
		{"a share that gives a quota of a millisecond or more: the short period", 0.3, Pacing{3 * ms, PacePeriod}},
		{"more than a CPU (several dirtying tasks)", 2.5, Pacing{25 * ms, PacePeriod}},
		{"a small share: the period that gives it a millisecond", 0.02, Pacing{1 * ms, 50 * ms}},
		{"a share CFS cannot give: a millisecond a second, the least", 0.0001, Pacing{1 * ms, MaxPacePeriod}},
		{"none (at the limit): the least", 0, Pacing{1 * ms, MaxPacePeriod}},
	} {
		if got := PaceFor(tt.share); got != tt.want {
			t.Errorf("%s: PaceFor(%v) = %+v, want %+v", tt.name, tt.share, got, tt.want)
		}
	}
}

// The paced throttle, step by step: limits dirty_bytes 16M,
// dirty_background_bytes 8M (freerun 12 MiB, setpoint 14 MiB), a device
// measured at 100 MiB/s, the tasks dirtying 1 GiB per CPU-second.
func TestThePacedThrottle(t *testing.T) {
	const bw = 100 * mib
	limits := memcg.DirtyLimits{Background: 8 * mib, Limit: 16 * mib}
	c := NewController()
	c.bw = bandwidth{bw: bw, avg: bw, drainMeasured: true}
	c.pacer.efficiency = 1 << 30
	t0 := time.Unix(100, 0)
	frozen := false
	step := func(at time.Duration, dirty uint64, paced Pacing) Decision {
		in := scenarioInput(t0.Add(at), 0, dirty, 0)
		in.Dirty, in.Freezer, in.Pacer, in.Paced, in.ActiveInterval, in.Frozen = limits, FreezerHeld, true, paced, 50*ms, frozen
		d := c.Step(in)
		frozen = d.Throttle == ThrottleFreeze || d.Throttle == ThrottleHold
		return d
	}
	// The bandwidth estimate moves a little from step to step: a pace
	// within 1 % of the one wanted is it.
	near := func(a, b Pacing) bool {
		return a.Period == b.Period && float64(a.Quota) >= 0.99*float64(b.Quota) && float64(a.Quota) <= 1.01*float64(b.Quota)
	}
	share := func(pos float64) float64 { return bw * pos / (1 << 30) }
	for _, tt := range []struct {
		name     string
		at       time.Duration
		dirty    uint64
		wantPace Pacing
		throttle Throttle
	}{
		{"below freerun: not paced", 0, 10 * mib, Pacing{}, ThrottleNone},
		{"at the setpoint: paced to the device's speed (pos_ratio 1)", 10 * ms, 14 * mib, PaceFor(share(1)), ThrottleNone},
		{"at the limit: the least pace, no freeze", 20 * ms, 16 * mib, PaceFor(0), ThrottleNone},
		{"past the limit by a quarter of the band: the freezer takes over", 30 * ms, 17 * mib, PaceFor(0), ThrottleFreeze},
		{"back at the limit: thawed, still paced", 40 * ms, 16 * mib, PaceFor(0), ThrottleThaw},
		{"at freerun: paced fast (pos_ratio 2)", 50 * ms, 12 * mib, PaceFor(share(2)), ThrottleNone},
		{"below freerun for less than PaceLinger: the pace stays", 60 * ms, 11 * mib, PaceFor(share(2)), ThrottleNone},
		{"below freerun for PaceLinger: released", 60*ms + PaceLinger, 11 * mib, Pacing{}, ThrottleNone},
	} {
		d := step(tt.at, tt.dirty, Pacing{})
		if !near(d.Pace, tt.wantPace) || d.Throttle != tt.throttle {
			t.Errorf("%s: Pace %+v Throttle %v, want %+v %v", tt.name, d.Pace, d.Throttle, tt.wantPace, tt.throttle)
		}
		if d.Pace.On() && (d.NextLook > PaceInterval || !d.Active) {
			t.Errorf("%s: paced, but NextLook %v Active %v: want a look within PaceInterval", tt.name, d.NextLook, d.Active)
		}
	}
}

// The efficiency is measured from the CPU the paced tasks used, so that
// a wrong first guess is corrected.
func TestThePaceLearnsTheTasksEfficiency(t *testing.T) {
	limits := memcg.DirtyLimits{Background: 8 * mib, Limit: 16 * mib}
	c := NewController()
	t0 := time.Unix(100, 0)
	in := func(at time.Duration, dirtied uint64, cpu time.Duration) Input {
		x := scenarioInput(t0.Add(at), 0, 14*mib, dirtied)
		x.Dirty, x.Freezer, x.Pacer, x.Paced, x.PacedCPU = limits, FreezerHeld, true, Pacing{3 * ms, 10 * ms}, cpu
		return x
	}
	c.Step(in(0, 0, 0))
	// 10 ms of CPU dirtied 5 MiB: 500 MiB per CPU-second.
	c.Step(in(300*ms, 5*mib, 10*ms))
	if got, want := c.pacer.efficiency, 500.0*mib; got < want*0.999 || got > want*1.001 {
		t.Errorf("efficiency %.0f B/CPU-s, want %.0f", got, want)
	}
}
