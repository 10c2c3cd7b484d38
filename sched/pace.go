package sched

import (
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/policy"
)

// The paced throttle's hands (policy.Input.Pacer): the Core begins a
// pacing episode of a cgroup's dirtying tasks when a decision first paces
// them, changes the pace as the decisions do, and ends the episode when
// a decision releases them, the cgroup goes, or the Core stops. As with
// the freezer, the host's episode (host.Paced) is the driver's resource,
// which the Core holds opaquely, and the ops of one cgroup's episode run
// one at a time, in order.

// pace is the pacing state of one cgroup.
type pace struct {
	// open says an episode is open: from a Pace handed out until its
	// Unpace; episode is the host's, once the Pace returned it.
	open    bool
	episode host.Paced
	// cur is the pace asked for last; the ops carry it when they are
	// handed out, so that a queued change sets the latest pace. applied
	// is the pace in force, as the last op that returned set it (a Pace
	// takes hold only once its threads have moved).
	cur, applied policy.Pacing
	// busy says an op of the episode is in flight; queued are the kinds
	// waiting for it.
	busy   bool
	queued []Kind
	// unavailable is why the host cannot pace the cgroup: the freezer
	// alone throttles it then.
	unavailable string
	// began is when the episode began; cpu the CPU time its tasks used,
	// as the last step read it; counted is when its time was last added
	// to the cgroup's PacedTime (countPaced).
	began, counted time.Time
	cpu            time.Duration
	// held is the episode's held time as last read (host.PacedThrottled),
	// and heldAt when a step last asked for it (Op.Held).
	held   time.Duration
	heldAt time.Time
}

// isOpen, isBusy and host read a pace that may not be there
// (cgroup.pace): none is closed and idle, with no episode of the host's.
func (p *pace) isOpen() bool { return p != nil && p.open }
func (p *pace) isBusy() bool { return p != nil && p.busy }
func (p *pace) host() host.Paced {
	if p == nil {
		return nil
	}
	return p.episode
}

// carryPace carries out d's pace for st.
func (c *Core) carryPace(st *cgroup, d policy.Decision) {
	if st.pace == nil {
		if !d.Pace.On() {
			return // never paced, nor to be now
		}
		st.pace = new(pace)
	}
	p := st.pace
	switch {
	case d.Pace == p.cur && d.PaceRefill && p.open && !p.busy:
		c.paceOp(st, SetPace) // the same pace, written again
		return
	case d.Pace == p.cur:
		return
	case !d.Pace.On():
		c.endPace(st, "")
		return
	case !p.open:
		p.open, p.began, p.counted, p.cpu = true, c.now, c.now, 0
		c.pacing[st.cg] = true
		p.cur = d.Pace
		c.paceOp(st, Pace)
	default:
		p.cur = d.Pace
		c.paceOp(st, SetPace)
	}
	c.setState(st)
}

// endPace ends st's open pacing episode, if any: its tasks released.
func (c *Core) endPace(st *cgroup, why string) {
	p := st.pace
	if !p.isOpen() {
		return
	}
	c.countPaced(st)
	p.open, p.cur, p.applied = false, policy.Pacing{}, policy.Pacing{}
	delete(c.pacing, st.cg)
	c.paceOp(st, Unpace)
	c.touch(st)
	c.setState(st)
	args := []any{"cgroup", st.cg, "duration", c.now.Sub(p.began).Round(time.Microsecond), "cpu", p.cpu.Round(time.Microsecond)}
	if why != "" {
		args = append(args, "reason", why)
	}
	c.log(slog.LevelInfo, "pacing ended", args...)
}

// countHeld adds to st's counters what its episode's held time grew by
// since the last reading, so that a long episode counts as it goes. A
// reading of zero is a failed one: nothing is counted.
func (c *Core) countHeld(st *cgroup, held time.Duration) {
	if p := st.pace; held > p.held {
		st.edit().Counters.PaceHeld += held - p.held
		p.held = held
	}
}

// countPaced adds the time of st's open episode since it was last counted
// to st's PacedTime, at each step and at its end, so that the status and
// memcgd_cgroup_paced_seconds_total grow while a long episode lasts, not
// only once it ends.
func (c *Core) countPaced(st *cgroup) {
	p := st.pace
	if !p.isOpen() || !c.now.After(p.counted) {
		return
	}
	st.edit().Counters.PacedTime += c.now.Sub(p.counted)
	p.counted = c.now
}

// pacedBelow reports whether a cgroup beneath cg has a pacing episode
// open. Few cgroups are paced at once, so it looks at those alone.
func (c *Core) pacedBelow(cg host.Cgroup) bool {
	for p := range c.pacing {
		if p != cg && (cg == "/" || strings.HasPrefix(string(p), string(cg)+"/")) {
			return true
		}
	}
	return false
}

// paceOp queues an op of st's episode, after the one in flight.
func (c *Core) paceOp(st *cgroup, k Kind) {
	p := st.pace
	if p.busy {
		p.queued = append(p.queued, k)
		return
	}
	c.sendPace(st, k)
}

// sendPace hands out an op of st's episode with its latest pace; one that
// has no episode (its Pace failed) is dropped.
func (c *Core) sendPace(st *cgroup, k Kind) {
	p := st.pace
	op := Op{Kind: k, Cgroup: st.cg, Quota: p.cur.Quota, Period: p.cur.Period}
	if k != Pace {
		if p.episode == nil {
			return
		}
		op.Paced = p.episode
		if k == Unpace {
			p.episode = nil
		}
	}
	p.busy = true
	c.emitFirst(op, pendingOp{cg: st})
}

// paced takes a pacing op's result.
func (c *Core) paced(pd pendingOp, r Result) {
	st := pd.cg
	p := st.pace
	p.busy = false
	defer func() {
		for !p.busy && len(p.queued) > 0 {
			k := p.queued[0]
			p.queued = p.queued[1:]
			c.sendPace(st, k)
		}
	}()
	defer c.touch(st)
	if pd.op.Kind == Unpace {
		c.countHeld(st, r.PacedThrottled)
		p.held, p.heldAt = 0, time.Time{} // the next episode's groups are new
	}
	switch {
	case r.Err == nil:
		if pd.op.Kind == Pace {
			p.episode = r.Paced
			st.edit().Counters.Paces++ // counted once the host paces it
		}
		if pd.op.Kind != Unpace && p.open {
			p.applied = policy.Pacing{Quota: pd.op.Quota, Period: pd.op.Period}
		}
	case pd.op.Kind == Pace:
		p.open, p.cur, p.applied, p.queued = false, policy.Pacing{}, policy.Pacing{}, nil
		delete(c.pacing, st.cg)
		c.setState(st)
		switch {
		case errors.Is(r.Err, errors.ErrUnsupported):
			p.unavailable = r.Err.Error()
			c.log(slog.LevelWarn, "pacing unavailable: the freezer throttles", "cgroup", st.cg, "reason", p.unavailable)
		case isVanished(r.Err):
		default:
			st.edit().Counters.Errors++
			c.log(slog.LevelWarn, "pace", "cgroup", st.cg, "err", r.Err)
		}
	case isVanished(r.Err):
	case pd.op.Kind == SetPace && errors.Is(r.Err, errors.ErrUnsupported):
		// The episode can hold none of the threads it finds (their
		// tenant took the pace group's name): the next step's Pace says
		// why, and the freezer throttles.
		c.endPace(st, "no thread paceable")
	default:
		st.edit().Counters.Errors++
		c.log(slog.LevelWarn, pd.op.Kind.String(), "cgroup", st.cg, "err", r.Err)
		if pd.op.Kind == SetPace {
			// The episode is in an unknown state: end it; the next
			// step paces the cgroup afresh.
			c.endPace(st, "set pace failed")
		}
	}
}
