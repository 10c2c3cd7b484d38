package policy

import (
	"time"

	"github.com/memcgd/memcgd/memcg"
)

// MaxReclaimBackoff is the longest a cgroup whose reclaim keeps finding
// nothing waits between attempts.
const MaxReclaimBackoff = 30 * time.Second

// backoff spaces out the reclaim attempts on one cgroup while they
// fail. A cgroup at its watermark with nothing reclaimable (anonymous
// memory without swap, memory.min, mlocked pages) asks for reclaim at every
// step, and every attempt costs a synchronous reclaim pass in the kernel
// (and on v1 a journalled limit squeeze). So each failure
// doubles the wait before the next attempt, from the active interval up to
// MaxReclaimBackoff. A success ends the backoff, and so does growth of the
// cgroup's page cache by a reclaim step: that is new memory reclaim can
// take. Growth of anonymous memory does not count, so that a tenant cannot
// end the backoff by allocating and freeing.
//
// The same wait spaces out the full flushes of a cgroup the host found
// nothing to flush for (no open file on a filesystem it may sync): each
// request still lists the cgroup's files.
type backoff struct {
	fails int       // consecutive failed attempts
	until time.Time // no attempt before this
	file  uint64    // the cgroup's file pages at the last failure
}

// allow reports whether reclaim may be tried now on a cgroup observed as s,
// ending the backoff if its page cache grew by step since the last failure.
func (b *backoff) allow(now time.Time, s memcg.Stat, step uint64) bool {
	if b.fails == 0 {
		return true
	}
	if s.File >= b.file+step {
		*b = backoff{}
		return true
	}
	return !now.Before(b.until)
}

// record takes the outcome of an attempt on a cgroup observed as s before
// it: failed says that the kernel found nothing or the attempt failed.
func (b *backoff) record(now time.Time, s memcg.Stat, failed bool, base time.Duration) {
	if !failed {
		*b = backoff{}
		return
	}
	b.fails++
	b.until = now.Add(backoffDelay(b.fails, base))
	b.file = s.File
}

// backoffDelay is the wait after the n-th consecutive failure: base doubled
// n-1 times, at most MaxReclaimBackoff.
func backoffDelay(n int, base time.Duration) time.Duration {
	d := max(base, time.Millisecond)
	for i := 1; i < n && d < MaxReclaimBackoff; i++ {
		d *= 2
	}
	return min(d, MaxReclaimBackoff)
}

// backoffWake is the usage at which a cgroup whose reclaim backs off must
// be looked at before the backoff ends: grown by a reclaim step, or by
// enough new pages to reach its dirty background threshold.
func backoffWake(s memcg.Stat, dl memcg.DirtyLimits, step uint64) uint64 {
	wake := satAdd(s.Usage, step)
	if bg := dl.Background; bg != memcg.NoLimit && bg > s.Dirty {
		wake = min(wake, satAdd(s.Usage, bg-s.Dirty))
	}
	return wake
}

// FlushBackoffBase is the first wait after a full flush found nothing to
// flush; it doubles up to MaxReclaimBackoff while that goes on.
const FlushBackoffBase = time.Second

// satAdd is a+b, at most memcg.NoLimit.
func satAdd(a, b uint64) uint64 {
	if a > memcg.NoLimit-b {
		return memcg.NoLimit
	}
	return a + b
}
