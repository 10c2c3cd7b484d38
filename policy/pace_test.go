package policy

import (
	"math"
	"testing"
	"time"

	"github.com/memcgd/memcgd/memcg"
)

func TestPaceFor(t *testing.T) {
	for _, tt := range []struct {
		name    string
		share   float64
		longest time.Duration
		want    Pacing
	}{
		{"a share in the smallest bursts: a millisecond of quota, the period that gives the share", 0.25, 0, Pacing{1 * ms, 4 * ms}},
		{"a small share: a longer period", 0.02, 0, Pacing{1 * ms, 50 * ms}},
		{"a whole CPU: every millisecond", 1, 0, Pacing{1 * ms, 1 * ms}},
		{"more than a CPU (several dirtying tasks): the shortest period", 2.5, 0, Pacing{2500 * time.Microsecond, 1 * ms}},
		{"a share CFS cannot give: a millisecond a second, the least", 0.0001, 0, Pacing{1 * ms, MaxPacePeriod}},
		{"none (at the limit): the least", 0, 0, Pacing{1 * ms, MaxPacePeriod}},
		{"before 6.18 the period is capped (20 ms): a small share gets the cap's least", 0.02, 20 * ms, Pacing{1 * ms, 20 * ms}},
		{"and none gets it too", 0, 20 * ms, Pacing{1 * ms, 20 * ms}},
		{"a share the cap allows is as without it", 0.25, 20 * ms, Pacing{1 * ms, 4 * ms}},
	} {
		if got := PaceFor(tt.share, tt.longest); got != tt.want {
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
	c.pacer = &pacer{efficiency: 1 << 30}
	t0 := time.Unix(100, 0)
	frozen := false
	// The cgroup's dirtied counter moves with its level: all it dirties
	// is its own, and nothing is written meanwhile.
	step := func(at time.Duration, dirty uint64, paced Pacing) Decision {
		in := scenarioInput(t0.Add(at), 0, dirty, dirty)
		in.Dirty, in.Freezer, in.Pacer, in.Paced, in.ActiveInterval, in.Frozen = limits, FreezerHeld, true, paced, 50*ms, frozen
		d := c.Step(in)
		frozen = d.Throttle == ThrottleFreeze || d.Throttle == ThrottleHold
		return d
	}
	// The bandwidth estimate moves a little from step to step: a pace
	// whose share is within 1 % of the one wanted is it.
	near := func(a, b Pacing) bool {
		return a.On() == b.On() && a.Limited() == b.Limited() && a.Share() >= 0.99*b.Share() && a.Share() <= 1.01*b.Share()
	}
	share := func(pos float64) float64 { return bw * pos / (1 << 30) }
	// The least pace lets the tasks dirty 1 MiB a period (a millisecond at
	// 1 GiB per CPU-second): its period is four times what the device
	// takes to clean that, 41 ms, rounded up to a power of two.
	least := PaceFor(0, 64*ms)
	var inForce Pacing
	for _, tt := range []struct {
		name     string
		at       time.Duration
		dirty    uint64
		wantPace Pacing
		throttle Throttle
	}{
		{"below the background threshold: not paced", 0, 6 * mib, Pacing{}, ThrottleNone},
		{"past the background threshold: paced without a limit, the threads moved before the pace must hold", 5 * ms, 10 * mib, Unlimited, ThrottleNone},
		{"at the setpoint: paced to the device's speed (pos_ratio 1)", 10 * ms, 14 * mib, PaceFor(share(1), 0), ThrottleNone},
		{"at the limit: the least pace, no freeze", 20 * ms, 16 * mib, least, ThrottleNone},
		{"past the limit, the least pace in force since now: no freeze", 22 * ms, 20 * mib, least, ThrottleNone},
		{"past the backstop, the least pace held, but falling (a burst that passed): no freeze", 27 * ms, 19*mib + 512*1024, least, ThrottleNone},
		{"past the backstop, rising under the least pace, but by no more than two grants of its quota and an overrun let the tasks dirty (the write's and the period's: 10 ms at 1 GiB per CPU-second) since it came into force, at 20 MiB: no freeze", 29 * ms, 26 * mib, least, ThrottleNone},
		{"past the backstop (a fifth of the limit) and still rising under the least pace, by more: the freezer takes over", 30 * ms, 31 * mib, least, ThrottleFreeze},
		{"back at the limit: thawed, still paced", 40 * ms, 16 * mib, least, ThrottleThaw},
		{"just past freerun: paced fast (pos_ratio about 2)", 50 * ms, 12*mib + 4096, PaceFor(share(2), 0), ThrottleNone},
		{"between background and freerun: paced without a limit", 60 * ms, 11 * mib, Unlimited, ThrottleNone},
		{"below the background threshold for less than PaceLinger: the tasks stay paced, without a limit", 70 * ms, 7 * mib, Unlimited, ThrottleNone},
		{"below the background threshold for PaceLinger: released", 70*ms + PaceLinger, 7 * mib, Pacing{}, ThrottleNone},
	} {
		// The driver puts each pace in force before the next step.
		d := step(tt.at, tt.dirty, inForce)
		inForce = d.Pace
		if !near(d.Pace, tt.wantPace) || d.Throttle != tt.throttle {
			t.Errorf("%s: Pace %+v Throttle %v, want %+v %v", tt.name, d.Pace, d.Throttle, tt.wantPace, tt.throttle)
		}
		if d.Pace.On() && (d.NextLook > PaceInterval || !d.Active) {
			t.Errorf("%s: paced, but NextLook %v Active %v: want a look within PaceInterval", tt.name, d.NextLook, d.Active)
		}
	}
}

// Where the driver names the dirtying threads, the backstop freezes for a
// thread it does not pace, and not for a paced task's burst, however far
// past the backstop: its resolution, which a freeze would buy with the
// tenant's short reads.
func TestTheBackstopFreezesOnlyForAnUnpacedThread(t *testing.T) {
	for _, tt := range []struct {
		name    string
		unpaced int
		want    Throttle
	}{
		{"every dirtier paced: no freeze", 0, ThrottleNone},
		{"a dirtier the driver does not pace: freeze", 1, ThrottleFreeze},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const bw = 100 * mib
			c := NewController()
			c.bw = bandwidth{bw: bw, avg: bw, drainMeasured: true}
			c.pacer = &pacer{efficiency: 1 << 30}
			t0 := time.Unix(100, 0)
			var inForce Pacing
			var d Decision
			// At the limit, then ever further past it under the least
			// pace: 64 MiB over the 16 MiB limit within 30 ms.
			for i, dirty := range []uint64{16 * mib, 20 * mib, 40 * mib, 60 * mib, 80 * mib} {
				in := scenarioInput(t0.Add(time.Duration(i)*10*ms), 0, dirty, dirty)
				in.Freezer, in.Pacer, in.Paced, in.ActiveInterval = FreezerHeld, true, inForce, 50*ms
				in.Unpaced, in.UnpacedKnown = tt.unpaced, true
				d = c.Step(in)
				inForce = d.Pace
				if d.Throttle != ThrottleNone {
					break
				}
			}
			if d.Throttle != tt.want {
				t.Errorf("throttle %v, want %v (pace %+v)", d.Throttle, tt.want, d.Pace)
			}
		})
	}
}

// The efficiency is measured from what the pace in force achieved: the
// bytes dirtied per second of its share, so that a wrong first guess,
// or a kernel that grants more or less than the quota, is corrected.
func TestThePaceLearnsWhatAShareAchieves(t *testing.T) {
	limits := memcg.DirtyLimits{Background: 8 * mib, Limit: 16 * mib}
	c := NewController()
	t0 := time.Unix(100, 0)
	in := func(at time.Duration, dirtied uint64) Input {
		x := scenarioInput(t0.Add(at), 0, 14*mib, dirtied)
		x.Dirty, x.Freezer, x.Pacer, x.Paced = limits, FreezerHeld, true, Pacing{3 * ms, 10 * ms}
		return x
	}
	c.Step(in(0, 0))
	// 300 ms at 0.3 of a CPU dirtied 9 MiB: 100 MiB per CPU-second.
	c.Step(in(300*ms, 9*mib))
	if got, want := c.pacer.efficiency, 100.0*mib; got < want*0.999 || got > want*1.001 {
		t.Errorf("efficiency %.0f B/s of a CPU's share, want %.0f", got, want)
	}
	// An interval in which nothing was dirtied says nothing.
	c.Step(in(600*ms, 9*mib))
	if got, want := c.pacer.efficiency, 100.0*mib; got < want*0.999 || got > want*1.001 {
		t.Errorf("after an idle interval: efficiency %.0f B/s of a CPU's share, want it kept at %.0f", got, want)
	}
}

// The efficiency is the bytes dirtied per second of the share the pace
// grants, over a window of at least a period (within one a task gets its
// quota or nothing). The CPU time the paced tasks used does not enter it:
// CFS delivers more than the least share and less than higher ones, and
// the share asked for is what the law sets.
func TestThePaceMeasuresEfficiencyPerShareGranted(t *testing.T) {
	type cpuStep struct {
		at      time.Duration
		dirtied uint64
		cpu     time.Duration // the paced tasks' CPU time read; 0: not read
		pace    Pacing        // in force; the zero Pacing: the case's
	}
	limits := memcg.DirtyLimits{Background: 8 * mib, Limit: 16 * mib}
	t0 := time.Unix(100, 0)
	least := PaceFor(0, 0) // 1 ms a second
	for _, tt := range []struct {
		name  string
		pace  Pacing
		steps []cpuStep
		want  float64 // bytes per second of one CPU's share after the steps
	}{
		{"a window shorter than the period says nothing", least,
			[]cpuStep{{0, 0, 10 * ms, Pacing{}}, {5 * ms, 4 * mib, 11 * ms, Pacing{}}}, 0},
		{"a window of a period: 2 MiB in 10 ms at a tenth of a CPU is 2000 MiB a second", Pacing{1 * ms, 10 * ms},
			[]cpuStep{{0, 0, 0, Pacing{}}, {5 * ms, 1 * mib, 0, Pacing{}}, {10 * ms, 2 * mib, 0, Pacing{}}}, 2000 * mib},
		{"the same, with the tasks using more CPU than the share: still per share granted", Pacing{1 * ms, 10 * ms},
			[]cpuStep{{0, 0, 10 * ms, Pacing{}}, {5 * ms, 1 * mib, 12 * ms, Pacing{}}, {10 * ms, 2 * mib, 14 * ms, Pacing{}}}, 2000 * mib},
		{"the same, with the tasks using less: still per share granted", Pacing{1 * ms, 10 * ms},
			[]cpuStep{{0, 0, 10 * ms, Pacing{}}, {5 * ms, 1 * mib, 10200 * time.Microsecond, Pacing{}}, {10 * ms, 2 * mib, 10500 * time.Microsecond, Pacing{}}}, 2000 * mib},
		{"a change of pace within a window: 1.5 MiB over 5 ms at a tenth and 5 ms at a fifth is 1000 MiB a second", Pacing{1 * ms, 10 * ms},
			[]cpuStep{{0, 0, 0, Pacing{}}, {5 * ms, mib / 2, 0, Pacing{}}, {10 * ms, 3 * mib / 2, 0, Pacing{2 * ms, 10 * ms}}}, 1000 * mib},
		{"a pace without a quota grants no share and teaches nothing", Unlimited,
			[]cpuStep{{0, 0, 10 * ms, Pacing{}}, {100 * ms, 40 * mib, 30 * ms, Pacing{}}, {200 * ms, 80 * mib, 50 * ms, Pacing{}}}, 0},
	} {
		c := NewController()
		for _, st := range tt.steps {
			x := scenarioInput(t0.Add(st.at), 0, 14*mib, st.dirtied)
			x.Dirty, x.Freezer, x.Pacer, x.Paced, x.PacedCPU = limits, FreezerHeld, true, tt.pace, st.cpu
			if st.pace.On() {
				x.Paced = st.pace
			}
			c.Step(x)
		}
		if got := c.pacer.efficiency; math.Abs(got-tt.want) > tt.want*0.001 {
			t.Errorf("%s: efficiency %.0f B/s of a CPU's share, want %.0f", tt.name, got, tt.want)
		}
	}
}

// A task that dirties faster than the device drains may not, at the
// share it is given, pass the limit before the next look: below freerun,
// where the kernel throttles nothing, as past it, the share is at most
// the headroom's (headroomShare).
func TestTheHeadroomBoundsAFastDirtier(t *testing.T) {
	const bw = 1000 * mib                                             // the device drains 5 MiB per PaceInterval
	const eff = 8000 * mib                                            // the tasks dirty 40 MiB per CPU-PaceInterval
	limits := memcg.DirtyLimits{Background: 8 * mib, Limit: 16 * mib} // freerun 12
	t0 := time.Unix(100, 0)
	for _, tt := range []struct {
		name  string
		dirty uint64
		want  float64 // share
	}{
		{"below freerun with 5 MiB of room: (5 + 5) / 40", 11 * mib, 0.25},
		{"just past freerun: the law (pos_ratio 2: 2 × 1000 MiB/s over 8000, 0.25) or the headroom ((4 + 5) / 40), the less", 12*mib + 4096, 0.225},
		{"at the setpoint: the law's 0.125, the headroom's (2 + 5) / 40 more", 14 * mib, 0.125},
	} {
		c := NewController()
		c.bw = bandwidth{bw: bw, avg: bw, drainMeasured: true}
		c.pacer = &pacer{efficiency: eff}
		x := scenarioInput(t0, 0, 13*mib, 0)
		x.Dirty, x.Freezer, x.Pacer = limits, FreezerHeld, true
		c.Step(x) // past freerun: the pace begins
		x = scenarioInput(t0.Add(ms), 0, tt.dirty, 0)
		x.Dirty, x.Freezer, x.Pacer = limits, FreezerHeld, true
		d := c.Step(x)
		if got := d.Pace.Share(); math.Abs(got-tt.want) > tt.want*0.01 {
			t.Errorf("%s: share %.4f (%+v), want %.4f", tt.name, got, d.Pace, tt.want)
		}
	}
	// A slow dirtier below freerun is not limited: the headroom allows
	// more than a CPU.
	c := NewController()
	c.bw = bandwidth{bw: bw, avg: bw, drainMeasured: true}
	c.pacer = &pacer{efficiency: 100 * mib}
	x := scenarioInput(t0, 0, 13*mib, 0)
	x.Dirty, x.Freezer, x.Pacer = limits, FreezerHeld, true
	c.Step(x)
	x = scenarioInput(t0.Add(ms), 0, 11*mib, 0)
	x.Dirty, x.Freezer, x.Pacer = limits, FreezerHeld, true
	if d := c.Step(x); d.Pace != Unlimited {
		t.Errorf("a 100 MiB per CPU-second dirtier below freerun: pace %+v, want Unlimited", d.Pace)
	}
}

// With level wake-ups a paced cgroup is not polled: the watcher reports
// it when dirty+writeback leaves the band in which its pace stands, the
// levels at which pos_ratio would have moved by PaceTolerance.
func TestAPacedCgroupIsWokenAtTheEdgesOfItsPace(t *testing.T) {
	const bw = 100 * mib
	limits := memcg.DirtyLimits{Background: 8 * mib, Limit: 16 * mib} // freerun 12, setpoint 14
	c := NewController()
	c.bw = bandwidth{bw: bw, avg: bw, drainMeasured: true}
	c.pacer = &pacer{efficiency: 1 << 30}
	in := scenarioInput(time.Unix(100, 0), 0, 14*mib, 0)
	in.Dirty, in.Freezer, in.Pacer, in.LevelWakes, in.ActiveInterval = limits, FreezerHeld, true, true, 50*ms
	d := c.Step(in)
	if !d.Pace.Limited() {
		t.Fatalf("at the setpoint: pace %+v, want a limit", d.Pace)
	}
	if d.NextLook != PaceLevelLook {
		t.Errorf("NextLook %v, want PaceLevelLook %v: the level wakes it, not the clock", d.NextLook, PaceLevelLook)
	}
	// pos_ratio 1 ± a quarter: dirty = 14 MiB ∓ 2 MiB × cbrt(0.25).
	edge := 2 * mib * math.Cbrt(0.25)
	near := func(got uint64, want float64) bool { return math.Abs(float64(got)-want) < 64*1024 }
	if !near(d.Wake.LevelAbove, 14*mib+edge) || !near(d.Wake.LevelBelow, 14*mib-edge) {
		t.Errorf("band [%.2f, %.2f] MiB, want [%.2f, %.2f]", float64(d.Wake.LevelBelow)/mib, float64(d.Wake.LevelAbove)/mib,
			(14*mib-edge)/mib, (14*mib+edge)/mib)
	}
	in.LevelWakes = false
	c2 := NewController()
	c2.bw, c2.pacer = c.bw, &pacer{efficiency: c.pacer.efficiency}
	if d := c2.Step(in); d.NextLook != PaceInterval || d.Wake.LevelAbove != memcg.NoLimit {
		t.Errorf("without level wakes: NextLook %v, LevelAbove %d; want PaceInterval and no level wake", d.NextLook, d.Wake.LevelAbove)
	}
}

// A write of a shorter period leaves the period timer armed for the
// expiry of the longer one before it: until that expiry the pace in force
// is written again every period, the write refilling the quota.
func TestAStaleTimerIsRefilledEveryPeriod(t *testing.T) {
	least, short := PaceFor(0, 64*ms), PaceFor(0.25, 0) // 1 ms per 64 ms, 1 ms per 4 ms
	c := NewController()
	c.pacer = new(pacer) // a cgroup that has been paced
	t0 := time.Unix(100, 0)
	for _, tt := range []struct {
		name       string
		at         time.Duration
		paced, ask Pacing
		refill     bool
		refillIn   time.Duration
	}{
		{"the least pace in force and asked: nothing to refill", 0, least, least, false, 0},
		{"a shorter period asked: its write refills", 5 * ms, least, short, false, 4 * ms},
		{"the shorter period in force, its period not yet past since the write", 7 * ms, short, short, false, 2 * ms},
		{"a period (less a look) since the write: written again", 9 * ms, short, short, true, 4 * ms},
		{"just after: not again", 10 * ms, short, short, false, 3 * ms},
		{"past the longer period's expiry the timer is the new period's: no more", 80 * ms, short, short, false, 0},
	} {
		in := Input{Now: t0.Add(tt.at), Paced: tt.paced}
		d := Decision{Pace: tt.ask}
		c.staleTimer(in, &d)
		if d.PaceRefill != tt.refill {
			t.Errorf("%s: PaceRefill %v, want %v", tt.name, d.PaceRefill, tt.refill)
		}
		if got := c.refillIn(in, d); got != tt.refillIn {
			t.Errorf("%s: next refill in %v, want %v", tt.name, got, tt.refillIn)
		}
	}
}

// The least pace's period is what keeps its dirtying to a quarter of what
// the device cleans, in powers of two milliseconds from 16, within the
// cap, and stays while the estimates wander by less than a factor of four.
func TestTheLeastPacesPeriodFollowsTheDevice(t *testing.T) {
	for _, tt := range []struct {
		name    string
		bw, eff float64
		cap     time.Duration
		want    time.Duration
	}{
		{"a fast device: the shortest, a few looks", 1500e6, 2e9, 0, 16 * ms},
		{"100 MiB/s, 1 GiB per CPU-second: 41 ms, rounded up", 100 * mib, 1 << 30, 0, 64 * ms},
		{"a slow device: long", 10e6, 2e9, 0, 1024 * ms},
		{"capped before 6.18", 10e6, 2e9, 20 * ms, 20 * ms},
	} {
		c := NewController()
		c.bw = bandwidth{bw: tt.bw, avg: tt.bw, drainMeasured: true}
		c.pacer = &pacer{efficiency: tt.eff}
		got := c.periodCap(Input{PacePeriodCap: tt.cap})
		if tt.want > MaxPacePeriod {
			tt.want = MaxPacePeriod
		}
		if got != min(tt.want, MaxPacePeriod) {
			t.Errorf("%s: period cap %v, want %v", tt.name, got, tt.want)
		}
	}
	c := NewController()
	c.bw = bandwidth{bw: 100 * mib, avg: 100 * mib, drainMeasured: true}
	c.pacer = &pacer{efficiency: 1 << 30}
	first := c.periodCap(Input{})
	c.bw.avg *= 2 // need 20 ms: within a factor of four of 64
	if got := c.periodCap(Input{}); got != first {
		t.Errorf("the bandwidth doubled: period cap %v, want %v kept", got, first)
	}
	c.bw.avg *= 4 // need 5 ms
	if got := c.periodCap(Input{}); got != 16*ms {
		t.Errorf("the bandwidth eight times: period cap %v, want 16ms", got)
	}
}
