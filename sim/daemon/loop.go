package daemon

import (
	"context"
	"errors"
	"time"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/policy"
	"github.com/memcgd/memcgd/sim/kernel"
)

// Loop is memcgd's driver on the policy contract of policy.Decision, as
// a real driver must carry it out; Driver is the older loop that steps
// every cgroup at a fixed interval.
//
// A cgroup is stepped only when something triggers it, and Reaction (the
// event latency: queueing, reading cgroupfs) after the trigger:
//   - the start-up scan (at time 0, no reaction);
//   - NextLook passing;
//   - the watcher: usage above Wake.UsageAbove (the usage threshold, on
//     every driver), and with Tracker the cgroup's dirtied bytes above
//     the counter read with the observation plus Wake.DirtiedAbove;
//   - the driver's own deadlines: HoldFor passing (the driver thaws the
//     cgroup at once, then steps it) and RunFor passing (the driver
//     freezes it at once, for policy.MaxPause at most, then steps it).
//
// Each step carries out its decision at once, in the documented order
// (write-out or flush, reclaim, the throttle), before anything else can
// happen, and replaces every deadline of the previous decision. Frozen
// is reported as the kernel has it. The agent's slow safety scans
// (minutes) are not modelled: the runs are shorter.
type Loop struct {
	H *Host
	// ActiveInterval is the ceiling of NextLook for an active cgroup
	// (the agent's --active-interval); Reaction the event latency.
	ActiveInterval, Reaction time.Duration
	// Tracker says a dirtied-bytes tracker wakes the driver.
	Tracker bool
	// Freezer is policy.FreezerHeld (the closed loop) or
	// policy.FreezerTimed (the open loop on the contract's timing).
	Freezer policy.Freezer
	// Managed are the cgroups memcgd manages, with their knobs.
	Managed []Managed

	cgs  []*loopCgroup
	byID map[int32]*loopCgroup

	// Steps counts controller steps, Wakeups the watcher's reports,
	// DriverFreezes and DriverThaws what the driver did on its own at
	// RunFor and HoldFor, Errors the actions that failed and Violations
	// decisions that broke the contract (a Hold of a thawed cgroup).
	Steps, Wakeups, DriverFreezes, DriverThaws, Errors, Violations int64
}

type loopCgroup struct {
	m   Managed
	cg  host.Cgroup
	id  int32
	ctl *policy.Controller
	// The driver's timers: the step after a trigger, NextLook, HoldFor
	// and RunFor.
	step, look, hold, run int32
	// runAfter is the RunFor that follows HoldFor while frozen.
	runAfter time.Duration
}

// Start registers the driver on k: its timers, the watcher's hook, and
// the start-up scan at time 0.
func (l *Loop) Start(k *kernel.Kernel) {
	l.byID = map[int32]*loopCgroup{}
	k.SetWatchHook(func(k *kernel.Kernel, m int32) {
		if c := l.byID[m]; c != nil {
			l.Wakeups++
			l.trigger(k, c)
		}
	})
	for _, m := range l.Managed {
		cg := m.Chain[len(m.Chain)-1]
		id, err := l.H.id(cg)
		if err != nil {
			l.Errors++
			continue
		}
		c := &loopCgroup{m: m, cg: cg, id: id, ctl: policy.NewController()}
		c.step = k.NewTimer(func(*kernel.Kernel) { l.stepCgroup(c) })
		c.look = k.NewTimer(func(k *kernel.Kernel) { l.trigger(k, c) })
		c.hold = k.NewTimer(func(k *kernel.Kernel) { l.holdPassed(k, c) })
		c.run = k.NewTimer(func(k *kernel.Kernel) { l.runPassed(k, c) })
		l.cgs = append(l.cgs, c)
		l.byID[id] = c
		k.ArmTimer(c.step, 0)
	}
}

// Stop thaws every cgroup the driver holds frozen: the daemon never
// leaves one behind.
func (l *Loop) Stop() {
	for _, c := range l.cgs {
		if l.H.IsFrozen(c.cg) {
			if err := l.H.Thaw(context.Background(), c.cg); err != nil {
				l.Errors++
			}
		}
	}
}

// trigger schedules a step of c Reaction from now, unless one is due
// sooner.
func (l *Loop) trigger(k *kernel.Kernel, c *loopCgroup) {
	at := k.Now() + kernel.Time(l.Reaction)
	if t, ok := k.TimerArmed(c.step); ok && t <= at {
		return
	}
	k.ArmTimer(c.step, at)
}

// holdPassed is HoldFor running out with no newer decision: thaw now, let
// the cgroup run for RunFor if the decision gave one, and step it.
func (l *Loop) holdPassed(k *kernel.Kernel, c *loopCgroup) {
	if l.H.IsFrozen(c.cg) {
		if err := l.H.Thaw(context.Background(), c.cg); err != nil {
			l.Errors++
		}
		l.DriverThaws++
	}
	if c.runAfter > 0 {
		k.ArmTimer(c.run, k.Now()+kernel.Time(c.runAfter))
	}
	c.runAfter = 0
	l.trigger(k, c)
}

// runPassed is RunFor running out with no newer decision: freeze now, for
// MaxPause at most, and step the cgroup.
func (l *Loop) runPassed(k *kernel.Kernel, c *loopCgroup) {
	if !l.H.IsFrozen(c.cg) {
		if err := l.H.Freeze(context.Background(), c.cg); err != nil {
			l.Errors++
		} else {
			l.DriverFreezes++
			k.ArmTimer(c.hold, k.Now()+kernel.Time(policy.MaxPause))
			c.runAfter = 0
		}
	}
	l.trigger(k, c)
}

// stepCgroup observes c, steps its controller and carries out the
// decision.
func (l *Loop) stepCgroup(c *loopCgroup) {
	ctx := context.Background()
	k := l.H.k
	chain := make([]memcg.Stat, 0, len(c.m.Chain))
	for _, cg := range c.m.Chain {
		s, err := l.H.Observe(ctx, cg)
		if err != nil {
			l.Errors++
			return
		}
		chain = append(chain, s)
	}
	eff := memcg.Resolve(chain, c.m.Knobs)
	self := chain[len(chain)-1]
	dec := c.ctl.Step(policy.Input{Now: l.H.Now(), Stat: self, Dirty: eff.Dirty,
		Watermarks: eff.Watermarks, WritebackFirst: eff.Knobs.WritebackFirst,
		Tracker: l.Tracker, Reaction: l.Reaction, ActiveInterval: l.ActiveInterval,
		Freezer: l.Freezer, Frozen: l.H.IsFrozen(c.cg)})
	l.Steps++

	// The actions, in the order Decision documents.
	var err error
	switch {
	case dec.Flush:
		err = l.H.Flush(ctx, c.cg)
	case dec.WriteOut:
		_, err = l.H.WriteOut(ctx, c.cg)
	}
	if err != nil {
		l.Errors++
	}
	if dec.Reclaim > 0 {
		if _, err := l.H.Reclaim(ctx, c.cg, dec.Reclaim); err != nil && !errors.Is(err, host.ErrNothingReclaimed) {
			l.Errors++
		}
	}
	if dec.Pause > 0 {
		if err := l.H.Pause(ctx, c.cg, dec.Pause); err != nil {
			l.Errors++
		}
	}
	frozen := l.H.IsFrozen(c.cg)
	switch dec.Throttle {
	case policy.ThrottleFreeze:
		if !frozen {
			err = l.H.Freeze(ctx, c.cg)
		}
	case policy.ThrottleHold:
		if !frozen {
			l.Violations++
		}
	case policy.ThrottleThaw:
		if frozen {
			err = l.H.Thaw(ctx, c.cg)
		}
	}
	if err != nil {
		l.Errors++
	}
	frozen = l.H.IsFrozen(c.cg)
	if frozen && !dec.Episode {
		l.Violations++
	}

	// Each decision replaces every deadline of the previous one.
	now := k.Now()
	k.StopTimer(c.look)
	k.StopTimer(c.hold)
	k.StopTimer(c.run)
	c.runAfter = 0
	switch {
	case frozen:
		hold := dec.HoldFor
		if hold <= 0 {
			hold = policy.MaxPause // a frozen cgroup always has a deadline
		}
		k.ArmTimer(c.hold, now+kernel.Time(hold))
		c.runAfter = dec.RunFor
	case dec.RunFor > 0:
		k.ArmTimer(c.run, now+kernel.Time(dec.RunFor))
	}
	if dec.NextLook > 0 {
		k.ArmTimer(c.look, now+kernel.Time(dec.NextLook))
	}
	dirtied := memcg.NoLimit
	if l.Tracker && dec.Wake.DirtiedAbove != memcg.NoLimit && self.Counters.DirtiedBytes <= memcg.NoLimit-dec.Wake.DirtiedAbove {
		dirtied = self.Counters.DirtiedBytes + dec.Wake.DirtiedAbove
	}
	k.Watch(c.id, dec.Wake.UsageAbove, dirtied)
}
