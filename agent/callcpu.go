package agent

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/memcgd/memcgd/internal/cputime"
	"github.com/memcgd/memcgd/sched"
)

// callCPU is the CPU time spent carrying out each kind of op: the host
// calls, most of it in the kernel (a write-out's sync_file_range submits
// the pages, a reclaim reclaims), the rest the daemon's own reading and
// parsing. A worker is locked to its thread for the op, so the thread's
// CPU clock around it is the op's, and the goroutines the op hands work to
// (cgroupfs/safeio's bounded operations) add theirs through a
// cputime.Sink.
type callCPU struct {
	ns, n [256]atomic.Int64 // CPU time and calls, by sched.Kind
}

// measured carries out op on the calling worker, counting its CPU time.
// The thread is locked for the op alone: a worker locked while it waits
// for its next op would cost a thread switch at each hand-off.
func (x *executor) measured(ctx context.Context, op sched.Op) sched.Result {
	var sink cputime.Sink
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := cputime.Thread()
	r := x.a.do(cputime.WithSink(ctx, &sink), op)
	x.a.calls.add(op.Kind, cputime.Thread()-before+sink.Load())
	return r
}

func (c *callCPU) add(k sched.Kind, d time.Duration) {
	c.n[k].Add(1)
	if d > 0 {
		c.ns[k].Add(int64(d))
	}
}

// byCall returns the CPU time of each kind of op that used any, by its
// name.
func (c *callCPU) byCall() map[string]time.Duration {
	out := make(map[string]time.Duration)
	for k := range c.ns {
		if ns := c.ns[k].Load(); ns > 0 {
			out[sched.Kind(k).String()] = time.Duration(ns)
		}
	}
	return out
}

// byCount returns how many of each kind of op were carried out, by its
// name.
func (c *callCPU) byCount() map[string]uint64 {
	out := make(map[string]uint64)
	for k := range c.n {
		if n := c.n[k].Load(); n > 0 {
			out[sched.Kind(k).String()] = uint64(n)
		}
	}
	return out
}

// Calls returns how many host calls of each kind the daemon's workers
// carried out since Run began, by the call's name: observe is a step of
// one cgroup.
func (a *Agent) Calls() map[string]uint64 { return a.calls.byCount() }

// CallCPU returns the CPU time the daemon's workers spent in each kind of
// host call since Run began, by the call's name ("write out",
// "reclaim", "observe", ...).
func (a *Agent) CallCPU() map[string]time.Duration { return a.calls.byCall() }
