package sched

import (
	"errors"
	"log/slog"
	"time"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/policy"
)

// The closed-loop throttle's hands (policy.FreezerHeld): the Core carries
// out each decision's freezer action and keeps its deadlines (HoldFor,
// RunFor) on its own timer heap, so that neither a late step nor a queue
// of other cgroups extends a freeze or lets a thawed writer run unseen.
// The host's episode (host.Frozen) is the driver's resource; the Core
// holds it opaquely and hands it back in the ops that act on it.

// throttle is the freezer state of one cgroup.
type throttle struct {
	// open says an episode is open: from a Freeze the Core handed out
	// until its End. episode is the host's, once the Freeze returned it.
	open    bool
	episode host.Frozen
	// frozen says the cgroup is frozen by the episode, as far as the ops
	// handed out go; since is when it was frozen.
	frozen bool
	since  time.Time
	// gen is bumped by every decision and deadline: an older timer entry
	// is stale.
	gen uint64
	// busy says a freezer op of the cgroup is in flight; queued are the
	// ones waiting for it, in order.
	busy   bool
	queued []Kind
	// refused is the last Freeze error, said once: a cgroup frozen by
	// someone else is refused at every step until they thaw it.
	refused string

	// What the episode did, for its log line: when it began, the time
	// frozen, the bytes written out, the peak dirty+writeback seen.
	began      time.Time
	paused     time.Duration
	pauses     int
	writtenOut uint64
	peak       uint64
}

// isOpen, isFrozen and isBusy read a throttle that may not be there
// (cgroup.thr): none is closed, thawed and idle.
func (t *throttle) isOpen() bool   { return t != nil && t.open }
func (t *throttle) isFrozen() bool { return t != nil && t.frozen }
func (t *throttle) isBusy() bool   { return t != nil && t.busy }

// carry carries out d's freezer action, episode and deadlines for st,
// observed as s.
func (c *Core) carry(st *cgroup, d policy.Decision, s memcg.Stat) {
	if st.thr == nil {
		if d.Throttle != policy.ThrottleFreeze && !d.Episode {
			return // never frozen, nor to be now
		}
		st.thr = new(throttle)
	}
	t := st.thr
	t.gen++ // each decision replaces every pending deadline
	if t.open {
		t.peak = max(t.peak, s.DirtyAndWriteback())
	}
	switch d.Throttle {
	case policy.ThrottleFreeze:
		switch {
		case !t.open:
			*t = throttle{open: true, frozen: true, since: c.now, gen: t.gen, refused: t.refused,
				began: c.now, peak: s.DirtyAndWriteback(), busy: t.busy, queued: t.queued}
			c.freezerOp(st, Freeze)
		case !t.frozen:
			t.frozen, t.since = true, c.now
			c.freezerOp(st, Refreeze)
		}
	case policy.ThrottleHold:
		// Frozen by the decision's observation; a deadline that thawed
		// the cgroup since (MaxPause) asked for a step, which decides.
	case policy.ThrottleThaw:
		if t.frozen {
			c.thaw(st, d.Paused)
		}
	case policy.ThrottleNone:
		if t.frozen { // the policy never leaves a cgroup frozen so
			c.thaw(st, c.now.Sub(t.since))
		}
	}
	if !d.Episode && t.open {
		c.endEpisode(st, "")
	}
	switch {
	case !t.open:
	case t.frozen && d.HoldFor > 0:
		c.at(timer{at: c.now.Add(d.HoldFor), kind: timerHold, cg: st, gen: t.gen, runAfter: d.RunFor})
	case !t.frozen && d.RunFor > 0:
		c.at(timer{at: c.now.Add(d.RunFor), kind: timerRun, cg: st, gen: t.gen})
	}
}

// thaw hands out a Thaw and counts the pause.
func (c *Core) thaw(st *cgroup, paused time.Duration) {
	t := st.thr
	t.frozen = false
	t.paused += paused
	t.pauses++
	st.edit().Counters.Pauses++
	st.edit().Counters.Paused += paused
	c.touch(st)
	c.freezerOp(st, Thaw)
}

// holdPassed is HoldFor passing with no newer decision: thaw, freeze
// again runAfter later if set; then step the cgroup.
func (c *Core) holdPassed(st *cgroup, runAfter time.Duration) {
	t := st.thr
	if !t.isOpen() || !t.frozen {
		return
	}
	c.thaw(st, c.now.Sub(t.since))
	c.stats.DriverThaws++
	c.log(slog.LevelDebug, "hold expired: thawed", "cgroup", st.cg, "run_for", runAfter)
	if runAfter > 0 {
		c.at(timer{at: c.now.Add(runAfter), kind: timerRun, cg: st, gen: t.gen})
	}
	c.wake(st, false)
}

// runPassed is RunFor passing with no newer decision: freeze again within
// the episode, for MaxPause at most; then step the cgroup.
func (c *Core) runPassed(st *cgroup) {
	t := st.thr
	if !t.isOpen() || t.frozen {
		return
	}
	t.frozen, t.since = true, c.now
	c.freezerOp(st, Refreeze)
	c.stats.DriverFreezes++
	c.log(slog.LevelDebug, "run expired: refrozen", "cgroup", st.cg)
	c.at(timer{at: c.now.Add(policy.MaxPause), kind: timerHold, cg: st, gen: t.gen})
	c.wake(st, false)
}

// endEpisode ends st's open episode, if any: thawed, its journal record
// done, its line logged. why, if set, says why the Core ends it rather
// than a decision.
func (c *Core) endEpisode(st *cgroup, why string) {
	t := st.thr
	if t == nil {
		return // never frozen
	}
	t.gen++
	if !t.open {
		return
	}
	if t.frozen {
		paused := c.now.Sub(t.since)
		t.paused += paused
		t.pauses++
		st.edit().Counters.Pauses++
		st.edit().Counters.Paused += paused
		t.frozen = false
		c.touch(st)
	}
	t.open = false
	c.freezerOp(st, End)
	args := []any{"cgroup", st.cg, "duration", c.now.Sub(t.began).Round(time.Microsecond),
		"paused", t.paused.Round(time.Microsecond), "pauses", t.pauses, "written_out_bytes", t.writtenOut, "peak_dirty_bytes", t.peak}
	if why != "" {
		args = append(args, "reason", why)
	}
	c.log(slog.LevelInfo, "throttle episode ended", args...)
}

// freezerOp queues a freezer op of st's, after the one in flight.
func (c *Core) freezerOp(st *cgroup, k Kind) {
	defer c.setState(st)
	t := st.thr
	if t.busy {
		t.queued = append(t.queued, k)
		return
	}
	c.sendFreezer(st, k)
}

// sendFreezer hands out a freezer op with the episode it acts on; one
// that has no episode (its Freeze failed) is dropped.
func (c *Core) sendFreezer(st *cgroup, k Kind) {
	t := st.thr
	op := Op{Kind: k, Cgroup: st.cg}
	if k != Freeze {
		if t.episode == nil {
			return
		}
		op.Episode = t.episode
		if k == End {
			t.episode = nil
		}
	}
	t.busy = true
	c.emitFirst(op, pendingOp{cg: st})
}

// throttled takes a freezer op's result.
func (c *Core) throttled(p pendingOp, r Result) {
	st := p.cg
	t := st.thr
	t.busy = false
	defer func() {
		for !t.busy && len(t.queued) > 0 {
			k := t.queued[0]
			t.queued = t.queued[1:]
			c.sendFreezer(st, k)
		}
	}()
	defer c.touch(st)
	switch p.op.Kind {
	case Freeze:
		if r.Err == nil {
			// The ops queued meanwhile act on it, an End included if
			// the episode ended while the freeze was in flight.
			t.refused, t.episode = "", r.Episode
			return
		}
		t.open, t.frozen = false, false
		t.queued = nil // no episode to act on
		c.setState(st)
		switch {
		case errors.Is(r.Err, errors.ErrUnsupported):
			c.unavailable(st, r.Err.Error())
		case isVanished(r.Err):
		case r.Err.Error() != t.refused:
			t.refused = r.Err.Error()
			st.edit().Counters.Errors++
			c.log(slog.LevelWarn, "freeze", "cgroup", st.cg, "err", r.Err)
		}
	case Refreeze:
		if r.Err == nil {
			return
		}
		// A refusal (a user thawed the cgroup meanwhile, which memcgd
		// respects) ends the episode.
		if !isVanished(r.Err) {
			st.edit().Counters.Errors++
			c.log(slog.LevelWarn, "refreeze", "cgroup", st.cg, "err", r.Err)
		}
		t.frozen = false
		c.endEpisode(st, "refreeze refused")
	case Thaw, End:
		if r.Err != nil && !isVanished(r.Err) {
			st.edit().Counters.Errors++
			c.log(slog.LevelWarn, p.op.Kind.String(), "cgroup", st.cg, "err", r.Err)
		}
	}
}

// unavailable records that no freezer reaches st, and why: it is never
// frozen again, and its status says so.
func (c *Core) unavailable(st *cgroup, why string) {
	if st.unavailable != "" {
		return
	}
	st.unavailable = why
	st.edit().Throttle = "throttle unavailable: " + why
	c.touch(st)
	c.log(slog.LevelWarn, "throttle unavailable", "cgroup", st.cg, "reason", why)
}
