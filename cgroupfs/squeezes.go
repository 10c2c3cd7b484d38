package cgroupfs

import (
	"sync"

	"github.com/memcgd/memcgd/host"
)

// squeezes remembers the v1 limit squeezes of each cgroup (act.Reclaim
// lowers memory.limit_in_bytes below usage and puts it back), so that an
// observation whose read overlapped one reports the limit the squeeze
// puts back, not the lowered one it held for a few milliseconds. A policy
// that took the lowered limit for the cgroup's own would see free memory
// far below low_wmark, reclaim that much past high_wmark, and derive its
// dirty thresholds from a limit the cgroup does not have.
type squeezes struct {
	mu sync.Mutex
	m  map[host.Cgroup]squeezeMark
}

// squeezeMark is one cgroup's record: gen counts the starts and ends of
// its squeezes (odd while one runs), original is the limit the latest
// one puts back.
type squeezeMark struct {
	gen      uint64
	original uint64
}

// start records that a squeeze of cg, whose limit is original, begins.
func (q *squeezes) start(cg host.Cgroup, original uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.m == nil {
		q.m = make(map[host.Cgroup]squeezeMark)
	}
	m := q.m[cg]
	q.m[cg] = squeezeMark{gen: m.gen + 1, original: original}
}

// end records that the squeeze of cg begun last has put its limit back.
func (q *squeezes) end(cg host.Cgroup) {
	q.mu.Lock()
	defer q.mu.Unlock()
	m := q.m[cg]
	m.gen++
	q.m[cg] = m
}

// mark returns cg's record; the zero mark if it was never squeezed.
func (q *squeezes) mark(cg host.Cgroup) squeezeMark {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.m[cg]
}

// forget drops cg's record.
func (q *squeezes) forget(cg host.Cgroup) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.m, cg)
}

// limit is the limit to report for a read of limit taken between the
// marks before and after: the read itself, unless a squeeze ran at some
// time during it (one in flight at either mark, or one that began or
// ended between them), and then the limit the squeeze puts back if that
// is higher. A limit lowered by another writer meanwhile is seen at the
// next read.
func (before squeezeMark) limit(read uint64, after squeezeMark) uint64 {
	if before.gen == after.gen && before.gen%2 == 0 {
		return read
	}
	return max(read, after.original)
}
