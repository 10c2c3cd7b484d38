package agent

import (
	"sync/atomic"
	"time"
)

// LatenessBounds are the upper bounds of the buckets of the loop's timer
// lateness: from the tenth of a millisecond a wake-up takes on an idle
// host to the quarter second a starved or stopped one can.
var LatenessBounds = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond,
}

// lateness counts how late the loop woke for its timer, the Core's next
// deadline (a paced cgroup's look, a thaw, a refreeze, a scan): the time
// from the deadline to the loop's taking it up. It is the daemon's own
// reaction delay, which the throttle's hold depends on; it grows when the
// node's CPUs are busier than the daemon's share, or when the machine is
// stopped (a VM its host stops past a CPU budget), and then every look
// comes that late. Counted by the loop, read by the metrics' scrape.
type lateness struct {
	counts [len(LatenessBounds) + 1]atomic.Uint64 // by bucket, the last past every bound
	sum    atomic.Int64                           // nanoseconds
}

func (l *lateness) observe(d time.Duration) {
	d = max(d, 0)
	i := len(LatenessBounds)
	for j, b := range LatenessBounds {
		if d <= b {
			i = j
			break
		}
	}
	l.counts[i].Add(1)
	l.sum.Add(int64(d))
}

// TimerLateness returns how late the daemon's loop woke for its timers
// since Run began: the count in each bucket of LatenessBounds (not
// cumulative; the last past every bound) and the sum.
func (a *Agent) TimerLateness() (counts []uint64, sum time.Duration) {
	counts = make([]uint64, len(a.late.counts))
	for i := range a.late.counts {
		counts[i] = a.late.counts[i].Load()
	}
	return counts, time.Duration(a.late.sum.Load())
}
