package watch

import (
	"container/heap"
	"time"
)

// The v2 usage poll's schedule. Cgroup v2 has no usage thresholds, so the
// Watcher reads memory.current of each cgroup watched with a UsageAbove;
// reading all of them every few seconds costs most of what 10,000 idle
// cgroups cost (docs/lab/2026-11-30-fastpath.md). Each cgroup is therefore read again
// after an interval of its own: the time it needs, growing at the larger
// of its recent growth rate and UsageRate, to cover its distance to the
// threshold, within MinUsagePoll and UsagePoll. A cgroup far below its
// threshold and not growing is read every UsagePoll; one near it, or
// growing fast, every MinUsagePoll; one without a threshold never.
//
// What this promises (docs/watch.md): a cgroup whose usage grows no
// faster than max(UsageRate, the rate seen at its last reads) is reported
// at most MinUsagePoll after it crosses its threshold, since its next read
// is due before it can get there; any other crossing is reported at most
// one interval, and so at most UsagePoll, after the last read before it.

// usagePoll is a watch's place in the schedule and what its last read
// found. The Watcher's mu guards it.
type usagePoll struct {
	index int           // in usageSchedule, -1 when not scheduled
	due   time.Duration // when the next read is due, on the schedule's clock
	usage uint64        // found by the last read
	at    time.Duration // of the last read that updated rate
	seen  bool          // usage and at hold a read
	rate  float64       // growth estimate, bytes per second, ≥ 0
}

// pollRule turns what a read found into when to read again.
type pollRule struct {
	min, max time.Duration // MinUsagePoll, UsagePoll
	rate     float64       // UsageRate, bytes per second
}

// rateWindow is how fast a cgroup's growth estimate falls once it grows
// more slowly: at once to a faster rate (a read too late costs a late
// report), over this window to a slower one (a read too early costs a
// pread).
const rateWindow = 10 * time.Second

// minRateSpan is the least time between two reads that measures a growth
// rate: a read at arming just after a poll would otherwise divide a few
// pages by microseconds.
const minRateSpan = 10 * time.Millisecond

// observe folds a read of usage at now into p's growth estimate.
func (p *usagePoll) observe(now time.Duration, usage uint64) {
	if !p.seen {
		p.usage, p.at, p.seen = usage, now, true
		return
	}
	dt := now - p.at
	if dt < minRateSpan {
		return // keep the older baseline: the next read measures over longer
	}
	r := 0.0
	if usage > p.usage {
		r = float64(usage-p.usage) / dt.Seconds()
	}
	if r >= p.rate {
		p.rate = r
	} else {
		w := min(float64(dt)/float64(rateWindow), 1)
		p.rate = r*w + p.rate*(1-w)
	}
	p.usage, p.at = usage, now
}

// next folds a read of usage at now into p and returns when the cgroup,
// watched for usage above threshold, is due to be read again.
func (r pollRule) next(p *usagePoll, now time.Duration, usage, threshold uint64) time.Duration {
	p.observe(now, usage)
	distance := threshold - usage
	if usage > threshold {
		distance = usage - threshold
	}
	return dueAfter(now, r.interval(distance, p.rate))
}

// interval is how long a cgroup distance bytes from its threshold (below
// it, or above it, where only a fall and a new crossing matter), growing
// at rate, may go unread.
func (r pollRule) interval(distance uint64, rate float64) time.Duration {
	rate = max(rate, r.rate)
	if rate <= 0 {
		return r.max
	}
	s := float64(distance) / rate
	if s >= r.max.Seconds() {
		return r.max
	}
	return max(time.Duration(s*float64(time.Second)), r.min)
}

// dueAfter returns when a read at now with the given interval is next due:
// now+interval, rounded down to a multiple of an eighth of the interval
// (1 ms, 10 ms, 100 ms or 1 s), so that cgroups with similar intervals
// fall due together and share one wake-up of the loop. Rounding down only
// reads earlier than the interval allows.
func dueAfter(now, interval time.Duration) time.Duration {
	q := time.Millisecond
	for _, g := range []time.Duration{time.Second, 100 * time.Millisecond, 10 * time.Millisecond} {
		if g <= interval/8 {
			q = g
			break
		}
	}
	due := (now + interval) / q * q
	return max(due, now+min(interval, time.Millisecond))
}

// usageSchedule is a min-heap of the polled watches by due time
// (container/heap): the loop sleeps until the first is due and reads
// those due, a batch at a time.
type usageSchedule []*watched

func (s usageSchedule) Len() int           { return len(s) }
func (s usageSchedule) Less(i, j int) bool { return s[i].poll.due < s[j].poll.due }
func (s usageSchedule) Swap(i, j int) {
	s[i], s[j] = s[j], s[i]
	s[i].poll.index, s[j].poll.index = i, j
}

// Push implements heap.Interface; use set.
func (s *usageSchedule) Push(x any) {
	wt := x.(*watched)
	wt.poll.index = len(*s)
	*s = append(*s, wt)
}

// Pop implements heap.Interface; use remove or popDue.
func (s *usageSchedule) Pop() any {
	old := *s
	wt := old[len(old)-1]
	old[len(old)-1] = nil
	*s = old[:len(old)-1]
	wt.poll.index = -1
	return wt
}

// set schedules wt's next read at due.
func (s *usageSchedule) set(wt *watched, due time.Duration) {
	wt.poll.due = due
	if wt.poll.index < 0 {
		heap.Push(s, wt)
		return
	}
	heap.Fix(s, wt.poll.index)
}

// remove takes wt out of the schedule, if it is in it.
func (s *usageSchedule) remove(wt *watched) {
	if wt.poll.index >= 0 {
		heap.Remove(s, wt.poll.index)
	}
}

// next returns when the first read is due; ok is false when none is
// scheduled.
func (s usageSchedule) next() (due time.Duration, ok bool) {
	if len(s) == 0 {
		return 0, false
	}
	return s[0].poll.due, true
}

// popDue takes out and returns the first watch due at or before now, or
// nil.
func (s *usageSchedule) popDue(now time.Duration) *watched {
	if len(*s) == 0 || (*s)[0].poll.due > now {
		return nil
	}
	return heap.Pop(s).(*watched)
}
