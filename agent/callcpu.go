package agent

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/memcgd/memcgd/internal/cputime"
	"github.com/memcgd/memcgd/sched"
)

// callCPU is the CPU time spent carrying out each kind of op: the host
// calls, most of it in the kernel (a write-out's sync_file_range submits
// the pages, a reclaim reclaims), the rest the daemon's own reading and
// parsing. A worker is locked to its thread for the op except while it
// waits for the goroutines it hands work to (cputime.Measure and Wait),
// so the thread's CPU clock over each stretch is the op's, and those
// goroutines (cgroupfs/safeio's bounded operations) add theirs through
// the same cputime.Sink.
type callCPU struct {
	ns, n [256]atomic.Int64 // CPU time and calls, by sched.Kind
}

// measured carries out op on the calling worker, counting its CPU time.
// The thread is locked for the op alone, and not while the op waits for
// the goroutines it hands work to (cputime.Wait): a locked goroutine
// costs two thread switches at each such wait, and one locked while it
// waits for its next op would cost them at each hand-off.
func (x *executor) measured(ctx context.Context, op sched.Op) sched.Result {
	var sink cputime.Sink
	var r sched.Result
	cputime.Measure(cputime.WithSink(ctx, &sink), func(ctx context.Context) { r = x.a.do(ctx, op) })
	x.a.calls.add(op.Kind, sink.Load())
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
