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
// of the cgroup). The device does not idle: freerun is above the
// background threshold, so write-out runs throughout.
//
// A freeze lasts at most MaxPause, the kernel's cap on one sleep: after
// it the cgroup is thawed whatever dirty is, and frozen again at the next
// look if still at the limit, as the kernel sleeps MAX_PAUSE again while
// a task is over it (a stalled device must not leave tenants frozen).
//
// The driver's reaction delay (Input.Reaction) is the least time until
// the next step, so both edges anticipate it: freeze now if the cgroup
// would pass the limit before the next step could, at its recent
// dirtying rate; thaw now if the device would bring it to freerun before
// then, at the estimated bandwidth.

// EpisodeLinger is how long a throttle episode stays open after a thaw:
// a writer that refreezes within it continues the episode (one journal
// record), and a writer that has stopped ends it.
const EpisodeLinger = time.Second

// throttleState is the closed-loop throttle's memory of one cgroup.
type throttleState struct {
	frozen      bool      // the last decision froze or held the cgroup
	frozenAt    time.Time // the step that froze it
	frozenBytes uint64    // bytes written since then, measured step by step
	episode     bool
	thawedAt    time.Time // the last thaw, or the freeze while frozen
}

// freezeLevel is the dirty+writeback level at which the closed loop
// freezes: the hard limit, less what the cgroup dirties within the
// reaction delay at its recent rate, never below the setpoint.
func (c *Controller) freezeLevel(in Input) uint64 {
	setpoint, limit := DirtySetpoint(in.Dirty, c.domainLimit)
	early := uint64(c.dirtyRate * in.Reaction.Seconds())
	return max(sat(limit, early), setpoint)
}

// thawLevel is the level at which a frozen cgroup is thawed: freerun,
// plus what the device drains within the reaction delay at the estimated
// bandwidth, never above the setpoint.
func (c *Controller) thawLevel(in Input) uint64 {
	setpoint, _ := DirtySetpoint(in.Dirty, c.domainLimit)
	early := uint64(c.bw.avg * in.Reaction.Seconds())
	return min(in.Dirty.Freerun()+early, setpoint)
}

// closedLoop decides the freezer action.
func (c *Controller) closedLoop(in Input, dirty uint64, d *Decision) {
	t := &c.throttle
	if in.Dirty.Limit == memcg.NoLimit {
		c.endEpisode(in.Now, d)
		return
	}
	switch {
	case t.frozen:
		held := in.Now.Sub(t.frozenAt)
		d.Why |= ReasonThrottle
		if dirty <= c.thawLevel(in) || held >= MaxPause {
			c.thaw(in.Now, d)
			break
		}
		d.Throttle, d.HoldFor = ThrottleHold, MaxPause-held
	case dirty >= c.freezeLevel(in):
		*t = throttleState{frozen: true, frozenAt: in.Now, episode: true, thawedAt: in.Now}
		d.Throttle, d.HoldFor = ThrottleFreeze, MaxPause
		d.Why |= ReasonThrottle
	case t.episode && in.Now.Sub(t.thawedAt) >= EpisodeLinger:
		t.episode = false
	}
	d.Episode = t.episode
}

// thaw ends a freeze: the pause was the drain, and the drain measures the
// device.
func (c *Controller) thaw(now time.Time, d *Decision) {
	t := &c.throttle
	held := now.Sub(t.frozenAt)
	c.bw.drained(t.frozenBytes, held)
	t.frozen, t.frozenBytes, t.thawedAt = false, 0, now
	d.Throttle, d.Paused = ThrottleThaw, held
	c.dirtied, c.pausedWhen = 0, now // the open loop's debt starts afresh
}

// endEpisode thaws a frozen cgroup and closes its episode: the driver can
// no longer hold a freeze, or the cgroup lost its limit.
func (c *Controller) endEpisode(now time.Time, d *Decision) {
	if c.throttle.frozen {
		c.thaw(now, d)
	}
	c.throttle.episode = false
}

// frozenLook is when to look again at a frozen cgroup: halfway to the
// drain's expected end at the estimated bandwidth, so that looks close in
// on it and the last is at MinLook resolution; every MinLook until a
// drain has measured the device (INIT_BW may be far off); never past the
// end of MaxPause.
func (c *Controller) frozenLook(in Input, dirty uint64) time.Duration {
	if !c.bw.drainMeasured {
		return MinLook
	}
	left := MaxPause - in.Now.Sub(c.throttle.frozenAt)
	excess := sat(dirty, c.thawLevel(in))
	half := time.Duration(float64(excess) / c.bw.avg / 2 * float64(time.Second))
	return max(min(half, left), MinLook)
}
