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
	ns [256]atomic.Int64 // by sched.Kind
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

// CallCPU returns the CPU time the daemon's workers spent in each kind of
// host call since Run began, by the call's name ("write out",
// "reclaim", "observe", ...).
func (a *Agent) CallCPU() map[string]time.Duration { return a.calls.byCall() }
