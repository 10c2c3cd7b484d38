// Package hostcall carries out the scheduler's ops on a host: the one
// dispatch from a sched.Op to a host.Host's calls, shared by the daemon's
// executor (package agent) and the simulator's daemon (sim/daemon), so
// that the simulated daemon calls its host as the shipped one does.
package hostcall

import (
	"context"
	"errors"
	"fmt"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/sched"
)

// Driver is what a driver keeps apart from its host: the watch of each
// cgroup's thresholds, and what it drops of a cgroup it no longer
// manages.
type Driver interface {
	// Watch arms cg's thresholds (sched.Watch).
	Watch(cg host.Cgroup, w host.Wake) error
	// Forget drops what the driver keeps of cg (sched.Forget).
	Forget(cg host.Cgroup) error
}

// Do carries out op on h, its Watch and Forget through d, and returns
// its result. Result.At is h's time once an observation's files were
// read, or once the op ended; Result.Took is left to the caller, whose
// clock it is. A host without the capability an op needs (host.Freezer,
// host.Pacer) fails the op with an error that wraps
// errors.ErrUnsupported.
func Do(ctx context.Context, h host.Host, d Driver, op sched.Op) (r sched.Result) {
	r.Op = op
	defer func() {
		if r.At.IsZero() {
			r.At = h.Now()
		}
	}()
	switch op.Kind {
	case sched.List:
		r.Cgroups, r.Err = h.Cgroups(ctx)
	case sched.Observe, sched.Refresh:
		observe(ctx, h, op, &r)
	case sched.Freeze:
		fz, ok := h.(host.Freezer)
		if !ok {
			r.Err = fmt.Errorf("freeze %s: the host has no freezer: %w", op.Cgroup, errors.ErrUnsupported)
			return r
		}
		r.Episode, r.Err = fz.Freeze(ctx, op.Cgroup)
	case sched.Thaw:
		r.Err = op.Episode.Thaw()
	case sched.Refreeze:
		r.Err = op.Episode.Refreeze()
	case sched.End:
		r.Err = op.Episode.End()
	case sched.Pace:
		pc, ok := h.(host.Pacer)
		if !ok {
			r.Err = fmt.Errorf("pace %s: the host cannot pace: %w", op.Cgroup, errors.ErrUnsupported)
			return r
		}
		r.Paced, r.Err = pc.Pace(ctx, op.Cgroup, op.Quota, op.Period)
	case sched.SetPace:
		r.Err = op.Paced.Set(op.Quota, op.Period)
	case sched.Unpace:
		if pt, ok := op.Paced.(host.PacedThrottled); ok {
			// Read before End removes the pace groups; an error
			// counts nothing.
			r.PacedThrottled, _ = pt.Throttled()
		}
		r.Err = op.Paced.End()
	case sched.WriteOut:
		r.WriteOut, r.Err = h.WriteOut(ctx, op.Cgroup, op.Bytes)
	case sched.Flush:
		r.Err = h.Flush(ctx, op.Cgroup)
	case sched.Reclaim:
		r.Reclaimed, r.Err = h.Reclaim(ctx, op.Cgroup, op.Bytes, op.Usage)
	case sched.Watch:
		r.Err = d.Watch(op.Cgroup, op.Wake)
	case sched.Forget:
		r.Err = d.Forget(op.Cgroup)
	}
	return r
}

// observe reads the cgroups op.Read names, then what op asks of the
// stepped cgroup beside them: its dirtied counter, and its pace's CPU
// time, hold and escapes. A failed read ends the op with what was read
// before it.
func observe(ctx context.Context, h host.Host, op sched.Op, r *sched.Result) {
	for _, p := range op.Read {
		s, err := h.Observe(ctx, p)
		if err != nil {
			r.Err = fmt.Errorf("observe %s: %w", p, err)
			return
		}
		r.Stats = append(r.Stats, s)
	}
	r.At = h.Now()
	if dc, ok := h.(host.DirtyCounter); ok && op.Dirtied {
		n, err := dc.DirtyCounts(ctx, op.Cgroup)
		r.Dirtied, r.HasDirtied, r.DirtiedErr = n, err == nil, err
	}
	if op.Paced != nil {
		// An error leaves the last reading: the policy measures nothing
		// from a step without one.
		r.PacedCPU, _ = op.Paced.CPU()
		if pt, ok := op.Paced.(host.PacedThrottled); ok && op.Held {
			r.PacedThrottled, _ = pt.Throttled()
		}
		if pe, ok := op.Paced.(host.PacedEscapes); ok {
			r.Unpaced, r.UnpacedKnown = pe.Unpaced()
		}
	}
}
