package kernel

// Seed 001: Ying Han, "memcg: per cgroup background reclaim" (2011, not
// merged). Each limited cgroup gets a kswapd that wakes when the free space
// under its limit falls below low_wmark and reclaims from the cgroup until
// free reaches high_wmark; the watermarks come from a per-cgroup
// min_free_kbytes as the zone's come from the global one (memcg.Knobs.
// Watermarks: low = min * 5/4, high = min * 3/2). Its reclaim counts as
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

// setWatermarks sizes m's watermarks from its knobs and limit.
func (o *Seed001) setWatermarks(k *Kernel, m int32) {
	c := &k.memcgs[m]
	if c.max >= noLimit {
		c.kswapd.low, c.kswapd.high = 0, 0
		return
	}
	w := c.Knobs.Watermarks(uint64(c.max) * PageSize)
	c.kswapd.low, c.kswapd.high = int64(w.Low/PageSize), int64(w.High/PageSize)
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
