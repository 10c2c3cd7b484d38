package policy

import (
	"time"

	"github.com/memcgd/memcgd/memcg"
)

// When to look again and at which thresholds to be woken. The driver
// steps a cgroup when its watcher reports it or when NextLook passes,
// and at nothing else but its slow safety scan; these rules are all the
// timing there is.

const (
	// MinLook is the floor of NextLook and the resolution at which a
	// frozen cgroup is watched draining: a millisecond, as the kernel
	// checks a throttled writer every few pages.
	MinLook = time.Millisecond
	// LookFraction divides the gap between the freerun ceiling and the
	// limit: at most 1/LookFraction of it may be dirtied unseen between
	// two looks (the fallback interval) or before a tracker wake-up, so
	// a writer overshoots the limit by at most a quarter of the band the
	// throttle works in.
	LookFraction = 4
	// DefaultActiveInterval is the ceiling of NextLook for an active
	// cgroup when the driver gives none (the agent's --active-interval).
	DefaultActiveInterval = 50 * time.Millisecond
	// RecheckInterval is how soon an idle cgroup holding dirty pages over
	// half its background threshold is looked at again without a tracker:
	// rewriting cached pages dirties them without charging new ones,
	// which a usage watch does not see.
	RecheckInterval = time.Second
	// DirtyPollThresh is the least DirtiedAbove: the kernel's
	// DIRTY_POLL_THRESH (mm/page-writeback.c, 128 KiB), the finest
	// granularity at which it checks a dirtier, so that a cgroup a few
	// pages short of a threshold does not take a wake-up per page.
	DirtyPollThresh = 32 * memcg.PageSize
	// rateWindow is how fast the dirtying rate estimate falls: it rises
	// at once to a faster rate (a look too late costs overshoot) and
	// falls over this window (a look too early costs only a step).
	rateWindow = time.Second
	// runRateWindow is the averaging window of the plain dirtying rate
	// that sizes RunFor: there a rate too high is not safe but costly
	// (the driver refreezes early, and with a slow driver the device
	// runs dry before the next step thaws the cgroup), and a rate too
	// low is caught by the watcher or the next look.
	runRateWindow = 100 * time.Millisecond
)

// timing fills in when to look again, whether the cgroup is active and
// the watcher's thresholds. ahead is the userspace kswapd's anticipated
// growth, as in Step; stale says the observation predates the latest
// reclaim (kswapd).
func (c *Controller) timing(in Input, dirty, ahead uint64, stale bool, d *Decision) {
	d.Wake = Wake{UsageAbove: wakeAt(in.Stat, in.Dirty, in.Watermarks, ahead, in.Tracker), DirtiedAbove: memcg.NoLimit,
		LevelAbove: memcg.NoLimit}
	if in.Tracker {
		if rel := c.dirtiedWake(in, dirty); rel != memcg.NoLimit {
			d.Wake.DirtiedAbove = satAdd(in.Stat.Counters.DirtiedBytes, rel)
		}
	}
	defer func() {
		if d.Active {
			// Looked at anyway (Wake). Reclaim against its limit
			// is the userspace kswapd's cue to run again, at once: a
			// step reclaims no further than high_wmark, so a writer
			// that charges faster than the looks come needs them.
			// Without the kswapd such a report would be a step
			// that does nothing the look does not.
			d.Wake.UsageAbove = memcg.NoLimit
			d.Wake.OnlyArmed = !in.backgroundReclaim()
		}
	}()
	var look time.Duration
	need := func(t time.Duration) {
		t = max(t, MinLook)
		if look == 0 || t < look {
			look = t
		}
	}
	bg := in.Dirty.Background
	if d.Pace.On() && !c.throttle.isFrozen() {
		// The kernel holds the pace between looks; with level wake-ups
		// the look comes when the pace must change, and a slow look
		// keeps the bandwidth and efficiency estimates current.
		if in.LevelWakes {
			d.Wake.LevelAbove, d.Wake.LevelBelow = c.paceBand(in, d.Pace)
			need(PaceLevelLook)
		} else {
			need(PaceInterval)
		}
		if t := c.refillIn(in, *d); t > 0 {
			need(t)
		}
	}
	if c.throttle.isFrozen() {
		// Every MinLook, not at the drain's expected end at the
		// estimated bandwidth: a device completes writeback in bursts,
		// tens of MiB after tens of ms of nothing, so a look sized from
		// the average comes after the cgroup has drained, the device
		// idle meanwhile. A freeze is when the writer certainly waits
		// on the daemon: a step per millisecond is what that costs.
		need(MinLook)
		d.Active = true
	}
	if !d.Idle() || dirty > 0 && dirty >= bg || c.throttle.inEpisode() {
		need(in.activeInterval())
		d.Active = true
	}
	if stale && d.Why&ReasonWatermark != 0 {
		// A run in progress saw a reading older than its last step:
		// look again at once, at what that step freed.
		need(MinLook)
		d.Active = true
	}
	if t, ok := c.kswapdLook(in, in.Stat.Free(), d); ok {
		need(t)
		d.Active = true
	}
	if c.throttle.inEpisode() && !c.throttle.frozen {
		// Close the episode on time even if nothing else looks.
		need(EpisodeLinger - in.Now.Sub(c.throttle.thawedAt))
		if in.Tracker && c.dirtyRate > 0 {
			// Thawed within an episode, look again by the time the
			// writer, at its peak rate and with the device writing
			// nothing, reaches the freeze level: the tracker's
			// wake-up is armed for that moment, but its delivery
			// can come late, the daemon's thread waiting for a CPU
			// the thawed writer holds. A look that finds the level
			// lower costs one step.
			room := sat(c.freezeLevel(in), dirty)
			need(time.Duration(float64(room) / c.dirtyRate * float64(time.Second)))
		}
	}
	if t, ok := c.dirtyLook(in); ok && !in.Tracker && in.freezer() != FreezerNone && !c.throttle.isFrozen() {
		need(t)
		d.Active = true
	}
	if look == 0 && !in.Tracker && bg != memcg.NoLimit && in.Stat.Dirty > bg/2 {
		// Only a tracker sees cached pages dirtied again.
		look = RecheckInterval
	}
	d.NextLook = look
}

// dirtySpan is the band the throttle works in: from the freerun ceiling
// to the hard limit. Zero without a limit.
func (c *Controller) dirtySpan(in Input) uint64 {
	if in.Dirty.Limit == memcg.NoLimit {
		return 0
	}
	_, limit := DirtySetpoint(in.Dirty, c.domainLimit)
	return max(sat(limit, in.Dirty.Freerun()), memcg.PageSize)
}

// dirtyLook is the fallback's adaptive look interval for a dirtying
// cgroup: the time it takes, at its recent dirtying rate, to dirty
// 1/LookFraction of the gap between freerun and the limit, at least
// MinLook. ok is false when the cgroup is quiet: it dirtied nothing since
// the last look, or so slowly that the active interval (the ceiling)
// already bounds what it dirties unseen; it is then left to the watcher
// and the other rules.
//
// Within a throttle episode a look that saw nothing dirtied does not
// make the cgroup quiet: its tasks may have been stopped all along by a
// freeze that is not its own (an ancestor's, when nested cgroups are
// managed), and taken for quiet it would be left to the active
// interval's look, in which a fast writer passes its limit.
// The rate, which falls over rateWindow, decides instead until the
// episode ends, EpisodeLinger after the last thaw: a writer that truly
// stopped costs a look per interval for that long.
func (c *Controller) dirtyLook(in Input) (t time.Duration, ok bool) {
	span := c.dirtySpan(in)
	if span == 0 || c.quiet && !c.throttle.inEpisode() || c.dirtyRate <= 0 {
		return 0, false
	}
	allow := float64(span) / LookFraction
	if float64(c.lastRun) > allow {
		// More than the allowance was dirtied since the last look: it
		// came too late, whatever the rate averaged over the interval
		// says (a burst after a long idle interval averages low).
		// Look again at the floor; the short interval then measures
		// the rate.
		return MinLook, true
	}
	t = time.Duration(allow / c.dirtyRate * float64(time.Second))
	if t >= in.activeInterval() {
		return 0, false
	}
	return max(t, MinLook), true
}

// dirtiedWake is the tracker's threshold, in bytes dirtied from this
// observation on (Wake.DirtiedAbove adds the counter): the least of
//   - the room left to the freeze level, less what the cgroup dirties
//     within the reaction delay: a tracker counts exactly, and dirtied
//     bytes are an upper bound on the rise of dirty+writeback (the
//     device writes meanwhile), so the wake-up comes before the limit and
//     no earlier wake-up is needed; but never less than 1/LookFraction of
//     the gap between freerun and the limit, which bounds the overshoot
//     as the fallback interval does;
//   - the room left to the background threshold (dirty alone, as
//     wb_over_bg_thresh compares), which with a tracker replaces the
//     recheck of cached pages dirtied again;
//
// and at least DirtyPollThresh. NoLimit when neither threshold is set.
func (c *Controller) dirtiedWake(in Input, dirty uint64) uint64 {
	wake := memcg.NoLimit
	if span := c.dirtySpan(in); span > 0 && (in.freezer() != FreezerNone || in.Pacer) {
		room := sat(c.actLevel(in), dirty)
		early := uint64(c.dirtyRate * in.Reaction.Seconds())
		wake = max(sat(room, early), span/LookFraction)
	}
	if bg := in.Dirty.Background; bg != memcg.NoLimit && in.Stat.Dirty < bg {
		wake = min(wake, bg-in.Stat.Dirty)
	}
	if wake == memcg.NoLimit {
		return wake
	}
	return max(wake, DirtyPollThresh)
}

// actLevel is the dirty+writeback level at which the throttle must act
// next: where a pace begins (freerun), or where the freezer takes over.
func (c *Controller) actLevel(in Input) uint64 {
	if in.Pacer && !c.paced(in) {
		return in.Dirty.Freerun()
	}
	return c.freezeLevel(in)
}

// wakeAt is the usage at which the watcher must report a cgroup: it
// cannot reach its dirty background threshold before charging that many
// new pages (dirtying cached pages is left to the tracker or the
// recheck), nor the usage at which the userspace kswapd wakes (free below
// kswapdWake). With a tracker the dirty term is left out: its
// DirtiedAbove reports the background threshold exactly, new pages and
// cached ones alike, and a v2 usage watch is a poll (cgroupfs
// watch_schedule.go) whose interval grows with the distance to this
// threshold, so a nearer one would only cost reads.
func wakeAt(s memcg.Stat, dl memcg.DirtyLimits, w memcg.Watermarks, ahead uint64, tracker bool) uint64 {
	wake := memcg.NoLimit
	if bg := dl.Background; !tracker && bg != memcg.NoLimit && bg > s.Dirty && s.Usage <= memcg.NoLimit-(bg-s.Dirty) {
		wake = s.Usage + (bg - s.Dirty)
	}
	if w.Enabled() && s.Limit != memcg.NoLimit {
		wake = min(wake, sat(s.Limit, kswapdWake(w, ahead)))
	}
	return wake
}

// updateDirtyRate folds in the bytes dirtied over an interval in which
// the cgroup ran (not frozen).
func (c *Controller) updateDirtyRate(dirtied uint64, elapsed time.Duration) {
	c.quiet, c.lastRun = dirtied == 0, dirtied
	rate := float64(dirtied) / elapsed.Seconds()
	w := min(float64(elapsed)/float64(runRateWindow), 1)
	if c.runRate == 0 {
		w = 1 // the first measurement replaces nothing
	}
	c.runRate = rate*w + c.runRate*(1-w)
	if rate >= c.dirtyRate {
		c.dirtyRate = rate
		return
	}
	w = min(float64(elapsed)/float64(rateWindow), 1)
	c.dirtyRate = rate*w + c.dirtyRate*(1-w)
}
