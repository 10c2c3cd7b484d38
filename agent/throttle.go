package agent

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/policy"
	"github.com/memcgd/memcgd/state"
)

// The closed-loop throttle's hands (policy.FreezerHeld): the agent holds a
// host.Frozen for each open throttle episode and carries out each
// decision's freezer action and deadlines. The deadlines (HoldFor,
// RunFor) are kept by a timer of the cgroup's own, not by the loop's
// queue: a late step, or a loop busy with other cgroups, must neither
// extend a freeze nor let a thawed writer run unseen.

// throttle is the freezer state of one cgroup. Its mutex is taken by the
// worker stepping the cgroup (carry), by the cgroup's timer (expire) and
// by the loop when it forgets the cgroup or stops (close); each holds it
// across the host's freezer call, a single bounded cgroupfs write.
type throttle struct {
	mu      sync.Mutex  // guards the fields below
	episode host.Frozen // the open episode; nil when none
	frozen  bool        // the cgroup is frozen by the episode now
	since   time.Time   // when frozen (the agent's clock), for a thaw by the timer
	timer   Timer       // the pending deadline, nil when none
	gen     uint64      // bumped by every decision: an older timer's firing is stale
	closed  bool        // forgotten or stopping: never freeze again
	// refused is the last Freeze error, said once: a cgroup frozen by
	// someone else is refused at every step (each millisecond or so)
	// until they thaw it.
	refused string
}

// isFrozen reports whether the cgroup is held frozen now: Input.Frozen.
func (t *throttle) isFrozen() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.frozen
}

// isOpen reports whether an episode is open.
func (t *throttle) isOpen() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.episode != nil
}

// carry carries out d's freezer action, episode and deadlines for st. It
// returns the counters of what it did; unavailable is the reason, when the
// host says no freezer reaches the cgroup.
func (a *Agent) carry(ctx context.Context, st *cgroupState, d policy.Decision) (c state.Counters, unavailable string) {
	fz, ok := a.opts.Host.(host.Freezer)
	if !ok {
		return c, ""
	}
	t := &st.thr
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gen++ // each decision replaces every pending deadline
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	if t.closed {
		return c, ""
	}
	fail := func(what string, err error) {
		if !errors.Is(err, host.ErrVanished) {
			c.Errors++
			a.log.Warn(what, "cgroup", st.cg, "err", err)
		}
	}
	switch d.Throttle {
	case policy.ThrottleFreeze:
		if t.episode == nil {
			end := a.calls.begin(st.cg, "freeze")
			f, err := fz.Freeze(ctx, st.cg)
			end()
			if err != nil {
				if errors.Is(err, errors.ErrUnsupported) {
					return c, err.Error()
				}
				if err.Error() != t.refused && !errors.Is(err, host.ErrVanished) {
					t.refused = err.Error()
					c.Errors++
					a.log.Warn("freeze", "cgroup", st.cg, "err", err)
				}
				break
			}
			t.refused = ""
			t.episode, t.frozen, t.since = f, true, a.clock.Now()
			break
		}
		if !t.frozen {
			a.refreeze(st, &c)
		}
	case policy.ThrottleHold:
		// Frozen by the decision's observation; a timer that thawed the
		// cgroup since (MaxPause) has asked for a step, which decides.
	case policy.ThrottleThaw:
		if t.frozen {
			end := a.calls.begin(st.cg, "thaw")
			err := t.episode.Thaw()
			end()
			if err != nil {
				fail("thaw", err)
			}
			t.frozen = false
			c.Pauses, c.Paused = 1, d.Paused
		}
	case policy.ThrottleNone:
		if t.frozen { // the policy never leaves a cgroup frozen so
			a.thawLocked(st, &c)
		}
	}
	if !d.Episode && t.episode != nil {
		a.endLocked(st, &c)
	}
	switch {
	case t.episode == nil:
	case t.frozen && d.HoldFor > 0:
		gen, run := t.gen, d.RunFor
		t.timer = a.clock.AfterFunc(d.HoldFor, func() { a.holdExpired(st, gen, run) })
	case !t.frozen && d.RunFor > 0:
		gen := t.gen
		t.timer = a.clock.AfterFunc(d.RunFor, func() { a.runExpired(st, gen) })
	}
	return c, ""
}

// refreeze freezes the cgroup again within its episode. A refusal (a user
// thawed the cgroup meanwhile, which memcgd respects) ends the episode.
// Caller holds st.thr.mu.
func (a *Agent) refreeze(st *cgroupState, c *state.Counters) {
	t := &st.thr
	end := a.calls.begin(st.cg, "refreeze")
	err := t.episode.Refreeze()
	end()
	if err != nil {
		if !errors.Is(err, host.ErrVanished) {
			c.Errors++
			a.log.Warn("refreeze", "cgroup", st.cg, "err", err)
		}
		a.endLocked(st, c)
		return
	}
	t.frozen, t.since = true, a.clock.Now()
}

// thawLocked thaws the cgroup on the driver's own account (a deadline, a
// decision that leaves no freeze): the pause is counted by the agent's
// clock. Caller holds st.thr.mu.
func (a *Agent) thawLocked(st *cgroupState, c *state.Counters) {
	t := &st.thr
	if err := t.episode.Thaw(); err != nil && !errors.Is(err, host.ErrVanished) {
		c.Errors++
		a.log.Warn("thaw", "cgroup", st.cg, "err", err)
	}
	t.frozen = false
	c.Pauses++
	c.Paused += a.clock.Now().Sub(t.since)
}

// endLocked ends the open episode: thawed, its journal record done.
// Caller holds st.thr.mu.
func (a *Agent) endLocked(st *cgroupState, c *state.Counters) {
	t := &st.thr
	if t.frozen {
		c.Pauses++
		c.Paused += a.clock.Now().Sub(t.since)
	}
	if err := t.episode.End(); err != nil && !errors.Is(err, host.ErrVanished) {
		c.Errors++
		a.log.Warn("end throttle episode", "cgroup", st.cg, "err", err)
	}
	t.episode, t.frozen = nil, false
}

// holdExpired is HoldFor passing with no newer decision: thaw, and freeze
// again run later if run is set; then step the cgroup.
func (a *Agent) holdExpired(st *cgroupState, gen uint64, run time.Duration) {
	t := &st.thr
	var c state.Counters
	t.mu.Lock()
	if t.gen != gen || t.closed || t.episode == nil || !t.frozen {
		t.mu.Unlock()
		return
	}
	t.timer = nil
	a.thawLocked(st, &c)
	a.log.Debug("hold expired: thawed", "cgroup", st.cg, "run_for", run)
	if run > 0 {
		t.timer = a.clock.AfterFunc(run, func() { a.runExpired(st, gen) })
	}
	t.mu.Unlock()
	a.addCounters(st, c)
	a.stepSoon(st)
}

// runExpired is RunFor passing with no newer decision: freeze again within
// the episode, for MaxPause at most; then step the cgroup.
func (a *Agent) runExpired(st *cgroupState, gen uint64) {
	t := &st.thr
	var c state.Counters
	t.mu.Lock()
	if t.gen != gen || t.closed || t.episode == nil || t.frozen {
		t.mu.Unlock()
		return
	}
	t.timer = nil
	a.refreeze(st, &c)
	a.log.Debug("run expired: refrozen", "cgroup", st.cg, "frozen", t.frozen)
	if t.frozen {
		t.timer = a.clock.AfterFunc(policy.MaxPause, func() { a.holdExpired(st, gen, 0) })
	}
	t.mu.Unlock()
	a.addCounters(st, c)
	a.stepSoon(st)
}

// closeThrottle ends st's open episode for good: the cgroup is forgotten
// or the agent stops. No decision or timer freezes it afterwards.
func (a *Agent) closeThrottle(st *cgroupState) {
	t := &st.thr
	var c state.Counters
	t.mu.Lock()
	t.closed = true
	t.gen++
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	if t.episode != nil {
		a.endLocked(st, &c)
	}
	t.mu.Unlock()
	a.addCounters(st, c)
}

// stepSoon asks the loop to step st now, ahead of the cgroups waiting for
// their turn. A request that finds the channel full is dropped: the
// cgroup's NextLook steps it anyway.
func (a *Agent) stepSoon(st *cgroupState) {
	select {
	case a.due <- st:
	default:
	}
}
