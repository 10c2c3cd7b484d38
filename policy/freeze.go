package policy

import (
	"time"

	"github.com/memcgd/memcgd/memcg"
)

// The closed-loop throttle (Input.Freezer == FreezerHeld). The kernel
// throttles a dirtier inside balance_dirty_pages() after every 32 pages
// or so; userspace sees a cgroup only when it looks, and can only stop
// all of its tasks or none. So instead of a pause sized in advance from a
// bandwidth guess (the open loop of throttle.go, which comes late and
// lasts too long), the cgroup is frozen when dirty+writeback reaches the
// limit, watched while the device drains it, and thawed when it is back
// at the freerun ceiling. A pause is then the measured drain.
//
// Why thaw at freerun, not at the setpoint: in balance_dirty_pages()
// (mm/page-writeback.c) freerun is where throttling stops altogether;
// between freerun and the limit the kernel slows the writer along
// pos_ratio, 2.0 at freerun, 1.0 at the setpoint and 0 at the limit, so
// that dirty settles at the setpoint where the writer runs at the
// device's speed. A freeze is all or nothing, so the nearest all-or-
// nothing law is hysteresis over the same band: run below the limit,
// stop at it, run again from freerun. The sawtooth between freerun and
// the limit averages (freerun + limit) / 2, the kernel's setpoint, and
// its swing is twice that of thawing at the setpoint, which halves the
// freeze/thaw cycles (each one writes cgroupfs twice and wakes every task
// of the cgroup). The device does not idle: within an episode every
// dirty page is written out at once (Controller.Step), not only those
// past the background threshold.
//
// A freeze lasts at most MaxPause, the kernel's cap on one sleep: after
// it the cgroup is thawed whatever dirty is, and frozen again after
// MinLook if still at the limit, as the kernel sleeps MAX_PAUSE again
// while a task is over it (a stalled device must not leave tenants
// frozen).
//
// The driver's reaction delay (Input.Reaction) is the least time until
// the next step, so both edges anticipate it: freeze now if the cgroup
// would pass the limit before the next step could, at its recent
// dirtying rate; thaw now if the device would bring it to freerun before
// then, at the estimated bandwidth. And since a step cannot come sooner,
// both edges also get a deadline the driver keeps by its own timer:
// HoldFor (thaw when the device should have drained the cgroup to the
// thaw level) and RunFor (freeze again when the cgroup should have
// dirtied its way back to the freeze level). With a fast driver the steps
// come first and measure; with a slow one (the test runs 50 ms) the
// timers keep the sawtooth, which a step then corrects. Without them a
// writer would run unseen for a whole reaction delay after every thaw: at
// 1.5 GB/s and 50 ms, 75 MB in against 40 MB out per MaxPause, and dirty
// would grow without bound.

// EpisodeLinger is how long a throttle episode stays open after a thaw:
// a writer that refreezes within it continues the episode (one journal
// record), and a writer that has stopped ends it.
const EpisodeLinger = time.Second

// throttleState is the closed-loop throttle's memory of one cgroup. It
// mirrors what the driver did, assuming it carried out every decision
// and its deadlines (HoldFor, RunFor) exactly.
type throttleState struct {
	frozen   bool      // by a decision, or by the driver at a RunFor
	frozenAt time.Time // when
	// frozenBytes is the bytes written since measureFrom, step by step:
	// the drain. Only intervals frozen throughout count, so a freeze by
	// the driver starts measuring at the step after it.
	frozenBytes uint64
	measureFrom time.Time
	episode     bool
	thawedAt    time.Time // the last thaw, or the freeze while frozen

	// The last decision's deadlines, as the driver keeps them: while
	// frozen, thaw at holdUntil and then, if runAfter is set, freeze
	// again runAfter later; while thawed, freeze at runUntil. A freeze
	// by the driver lasts MaxPause at most.
	holdUntil, runUntil time.Time
	runAfter            time.Duration
}

// isFrozen and inEpisode read a state that may not be there
// (Controller.throttle): none is thawed, outside an episode.
func (t *throttleState) isFrozen() bool  { return t != nil && t.frozen }
func (t *throttleState) inEpisode() bool { return t != nil && t.episode }

// replay brings the mirror to now: what the driver did on its own since
// the last decision. ran is how long the cgroup ran within (last, now];
// mixed says it was frozen and thawed within it, so that neither the
// drain nor the write bandwidth can be measured over it.
func (t *throttleState) replay(last, now time.Time) (ran time.Duration, mixed bool) {
	if t == nil {
		return now.Sub(last), false // never frozen: it ran throughout
	}
	at := last
	for {
		if t.frozen {
			if t.holdUntil.IsZero() || !now.After(t.holdUntil) {
				return ran, mixed // a step at the deadline decides itself
			}
			at, mixed = t.holdUntil, true
			t.frozen, t.thawedAt, t.holdUntil = false, at, time.Time{}
			t.runUntil = time.Time{}
			if t.runAfter > 0 {
				t.runUntil = at.Add(t.runAfter)
			}
			t.runAfter = 0
			continue
		}
		if t.runUntil.IsZero() || now.Before(t.runUntil) {
			return ran + now.Sub(at), mixed
		}
		ran += t.runUntil.Sub(at)
		at, mixed = t.runUntil, true
		t.frozen, t.frozenAt, t.thawedAt = true, at, at
		t.holdUntil, t.runUntil = at.Add(MaxPause), time.Time{}
	}
}

// freezeLevel is the dirty+writeback level at which the closed loop
// freezes: the hard limit, less what the cgroup dirties within the
// reaction delay at its recent rate, never below the setpoint.
func (c *Controller) freezeLevel(in Input) uint64 {
	if in.Pacer {
		return c.backstopLevel(in)
	}
	setpoint, limit := DirtySetpoint(in.Dirty, c.domainLimit)
	early := uint64(c.dirtyRate * in.Reaction.Seconds())
	return max(sat(limit, early), setpoint)
}

// thawLevel is the level at which a frozen cgroup is thawed: freerun,
// plus what the device drains within the reaction delay at the estimated
// bandwidth, never above the setpoint.
func (c *Controller) thawLevel(in Input) uint64 {
	setpoint, limit := DirtySetpoint(in.Dirty, c.domainLimit)
	if in.Pacer {
		return limit // the pace takes over from there
	}
	early := uint64(c.bw.avg * in.Reaction.Seconds())
	return min(in.Dirty.Freerun()+early, setpoint)
}

// backstopLevel is where the freezer takes over from a pace (pace.go):
// past the limit by a quarter of the band the throttle works in, or a
// fifth of the limit, whichever is more. A pace holds dirty+writeback
// to within a burst of the paced tasks (CFS throttles a task at its next
// tick past the quota: kernel/sched/fair.c, account_cfs_rq_runtime), so
// a limit of a few bursts is passed by that much before the freezer acts.
func (c *Controller) backstopLevel(in Input) uint64 {
	_, limit := DirtySetpoint(in.Dirty, c.domainLimit)
	return limit + max(c.dirtySpan(in)/LookFraction, limit/5)
}

// adopt takes the driver's word on the freezer state where the mirror
// disagrees. A cgroup the driver holds frozen unbeknown counts as frozen
// since the last observation, the earliest it can have been, so that
// MaxPause is never exceeded by much; it is in an episode.
func (t *throttleState) adopt(frozen bool, last, now time.Time) {
	if frozen {
		t.frozen, t.frozenAt, t.episode, t.thawedAt = true, last, true, last
	} else {
		t.frozen, t.thawedAt = false, now
	}
	t.frozenBytes, t.measureFrom = 0, now
	t.holdUntil, t.runUntil, t.runAfter = time.Time{}, time.Time{}, 0
}

// closedLoop decides the freezer action and its deadlines.
func (c *Controller) closedLoop(in Input, dirty uint64, d *Decision) {
	t := c.throttle
	if in.Dirty.Limit == memcg.NoLimit {
		c.endEpisode(in.Now, d)
		return
	}
	switch {
	case t.isFrozen():
		held := in.Now.Sub(t.frozenAt)
		d.Why |= ReasonThrottle
		if dirty <= c.thawLevel(in) || held >= MaxPause {
			c.thaw(in.Now, d)
			break
		}
		d.Throttle, d.HoldFor = ThrottleHold, c.holdFor(in, dirty, MaxPause-held)
	case dirty >= c.freezeLevel(in) && !in.PacedBelow && (!in.Pacer || c.pacer.escaped(in, dirty)):
		if t == nil {
			t = new(throttleState)
			c.throttle = t
		}
		*t = throttleState{frozen: true, frozenAt: in.Now, measureFrom: in.Now, episode: true, thawedAt: in.Now}
		d.Throttle, d.HoldFor = ThrottleFreeze, c.holdFor(in, dirty, MaxPause)
		d.Why |= ReasonThrottle
	case t.inEpisode() && in.Now.Sub(t.thawedAt) >= EpisodeLinger:
		t.episode = false
	}
	if t == nil {
		return // never frozen: no episode, no deadlines
	}
	d.Episode = t.episode
	t.holdUntil, t.runUntil, t.runAfter = time.Time{}, time.Time{}, 0
	switch {
	case !t.episode:
	case t.frozen:
		// Should HoldFor run out first, the device will have written
		// bw × HoldFor meanwhile.
		drained := uint64(c.bw.avg * d.HoldFor.Seconds())
		d.RunFor = c.runFor(in, sat(dirty, drained))
		t.holdUntil, t.runAfter = in.Now.Add(d.HoldFor), d.RunFor
	default:
		d.RunFor = c.runFor(in, dirty)
		if d.RunFor > 0 {
			t.runUntil = in.Now.Add(d.RunFor)
		}
	}
}

// holdFor is how long the driver may keep a frozen cgroup at dirty frozen
// without a new decision: what is left of MaxPause, and, once a drain has
// measured the device, no longer than the device takes to bring it to
// the thaw level. Then the driver thaws on time by its own timer however
// slow its reaction; a step that sees the level reached first thaws it
// earlier (a pause is the measured drain).
//
// The timer is for a step that comes late, so it never runs out before
// the next look (MinLook while frozen) plus the reaction delay, up to
// MinLook more: the device completes writeback in batches, so the drain
// at the average bandwidth is often due before the batch has completed,
// and a timer at MinLook would race the look that holds the cgroup,
// thawing the writer above the thaw level only for the look to freeze it
// again. A slow driver (a reaction delay above MinLook) is not waited
// for: its timer keeps the sawtooth.
func (c *Controller) holdFor(in Input, dirty uint64, left time.Duration) time.Duration {
	if !c.bw.drainMeasured {
		return left
	}
	drain := time.Duration(float64(sat(dirty, c.thawLevel(in))) / c.bw.avg * float64(time.Second))
	look := MinLook + min(in.Reaction, MinLook)
	return max(min(max(drain, look), left), MinLook)
}

// runFor is how long a thawed cgroup at dirty may run before the driver
// freezes it on its own: the time it takes to dirty its way up to the
// freeze level at its recent rate, less what the device writes meanwhile,
// at least MinLook. The driver's timer keeps the run short when its
// reaction is slow: a step comes at least Reaction after the thaw, and a
// writer that ran unseen that long would overshoot the limit by its rate
// times Reaction; with freezes capped at MaxPause, a writer dirtying more
// per Reaction than the device writes per MaxPause would grow dirty
// without bound. Zero (no deadline) while the cgroup is quiet or dirties
// no faster than the device writes: it cannot reach the limit by this
// estimate, and the watcher or the next look will see it if it does.
func (c *Controller) runFor(in Input, dirty uint64) time.Duration {
	if in.Pacer {
		return 0 // the pace holds the rate between looks
	}
	net := c.runRate - c.bw.avg
	if c.quiet || net <= 0 {
		return 0
	}
	room := sat(c.freezeLevel(in), dirty)
	return max(time.Duration(float64(room)/net*float64(time.Second)), MinLook)
}

// thaw ends a freeze: the pause was the drain, and the drain measures the
// device.
func (c *Controller) thaw(now time.Time, d *Decision) {
	t := c.throttle
	held := now.Sub(t.frozenAt)
	c.bw.drained(t.frozenBytes, now.Sub(t.measureFrom))
	t.frozen, t.frozenBytes, t.thawedAt = false, 0, now
	d.Throttle, d.Paused = ThrottleThaw, held
}

// endEpisode thaws a frozen cgroup and closes its episode: the driver can
// no longer hold a freeze, or the cgroup lost its limit.
func (c *Controller) endEpisode(now time.Time, d *Decision) {
	if c.throttle.isFrozen() {
		c.thaw(now, d)
	}
	if c.throttle != nil {
		c.throttle.episode = false
	}
}
