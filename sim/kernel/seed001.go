package kernel

import (
	"math/bits"

	"github.com/memcgd/memcgd/memcg"
)

// Seed 001: Ying Han, "memcg: per cgroup background reclaim" (2011, not
// merged). Each limited cgroup gets a kswapd that wakes when the free space
// under its limit falls below low_wmark and reclaims from the cgroup until
// free reaches high_wmark; the watermarks come from a per-cgroup
// min_free_kbytes as the zone's come from the global one (reclaimWmarks:
// low = min * 5/4, high = min * 3/2). Its reclaim counts as
// kswapd_steal/kswapd_pgscan, each wake-up as a pgoutrun.

// Seed001 is the per-memcg background reclaim option.
type Seed001 struct{}

// memcgKswapd is a cgroup's background reclaim thread.
type memcgKswapd struct {
	low, high int64 // watermarks in free pages under the limit
	awake     bool
	queued    bool
	throttled bool
	gen       uint32
}

// reclaimWmarks is seed 001's memory.reclaim_wmarks for a cgroup limited
// to limit pages, in pages of free space under the limit: min is its
// min_free_kbytes (memcg.MinFreeAuto: sized from the limit as
// init_per_zone_wmark_min() sizes the zone's, DefaultMinFreeKbytes), and
// low = min + min/4, high = min + 2 * (min/4), as __setup_per_zone_wmarks()
// steps a zone's, computed in bytes: the seed's 500M cgroup shows
// "low_wmark 3663360 / high_wmark 4396032", min 2862 KiB. No limit or a
// min_free_kbytes of 0 means no background reclaim (0, 0). A high mark
// above half the limit could never be met: it is capped there and low
// scaled by the same factor.
func reclaimWmarks(minFreeKbytes, limit int64) (low, high int64) {
	if limit >= noLimit || minFreeKbytes == 0 {
		return 0, 0
	}
	kb := minFreeKbytes
	if kb == memcg.MinFreeAuto {
		kb = DefaultMinFreeKbytes(limit)
	}
	mn := uint64(kb) << 10
	tmp := mn >> 2
	lowB, highB := mn+tmp, mn+2*tmp
	if half := uint64(limit) * PageSize / 2; highB > half {
		hi, lo := bits.Mul64(lowB, half)
		lowB, _ = bits.Div64(hi, lo, highB) // lowB < highB: no overflow
		highB = half
	}
	return int64(lowB / PageSize), int64(highB / PageSize)
}

// setWatermarks sizes m's watermarks from its knobs and limit.
func (o *Seed001) setWatermarks(k *Kernel, m int32) {
	c := &k.memcgs[m]
	c.kswapd.low, c.kswapd.high = reclaimWmarks(c.Knobs.MinFreeKbytes, c.max)
}

// check is called after a charge to m: wake the kswapd of every limited
// cgroup up the tree whose free space fell under its low watermark.
func (o *Seed001) check(k *Kernel, m int32) {
	for c := m; c != nilIdx; c = k.memcgs[c].parent {
		x := &k.memcgs[c]
		if x.kswapd.high == 0 || x.kswapd.awake || x.kswapd.queued {
			continue
		}
		if x.max-x.usage < x.kswapd.low {
			o.wake(k, c, k.now)
		}
	}
}

func (o *Seed001) wake(k *Kernel, m int32, at Time) {
	x := &k.memcgs[m].kswapd
	x.queued = true
	x.gen++
	k.heap.push(at, evMemcgKswapd, m, x.gen)
}

// run is one pass of the cgroup's kswapd: reclaim towards high_wmark, then
// go on at once, nap while writeback is needed, or sleep when balanced.
func (o *Seed001) run(k *Kernel, m int32) {
	c := &k.memcgs[m]
	x := &c.kswapd
	x.queued = false
	free := c.max - min(c.max, c.usage)
	if free >= x.high {
		x.awake = false
		return
	}
	if !x.awake {
		x.awake = true
		k.countEvent(m, mePgoutrun, 1)
	}
	sc := scanControl{nrToReclaim: max(x.high-free, SwapClusterMax), target: m, kswapd: true}
	k.doTryToFreePages(m, &sc)
	next := k.now + max(sc.cost, Microsecond)
	switch {
	case sc.throttle:
		// reclaim_throttle(VMSCAN_THROTTLE_WRITEBACK), as the task would.
		k.throttleWriteback()
		x.throttled = true
		k.node.throttledKswapds = append(k.node.throttledKswapds, m)
		next = k.now + reclaimThrottleWriteback
	case sc.nrReclaimed == 0:
		next = k.now + kswapdNap
	}
	o.wake(k, m, next)
}
