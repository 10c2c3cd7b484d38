package agent

import (
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/sched"
)

// callCPU is the CPU time the workers' threads spent carrying out each
// kind of op: the host calls, most of it in the kernel (a write-out's
// sync_file_range submits the pages, a reclaim reclaims), the rest the
// daemon's own reading and parsing. Each worker is locked to its thread,
// so the thread's CPU clock (CLOCK_THREAD_CPUTIME_ID) around an op is the
// op's.
type callCPU struct {
	ns [256]atomic.Int64 // by sched.Kind
}

// threadCPU is the calling thread's CPU time, 0 if unreadable.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
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
