package kernel

import "github.com/memcgd/memcgd/memcg"

// Thresholds a userspace watcher arms on a cgroup, and that report it once
// crossed: a usage threshold, as mem_cgroup_threshold() signals the
// eventfds registered through cgroup.event_control on v1
// (mm/memcontrol-v1.c, __mem_cgroup_threshold) and as the agent's usage
// watch does; and a dirtied-bytes threshold, as memcgd's eBPF tracker
// counts folio_account_dirtied() (mm/page-writeback.c) per cgroup. Both
// are checked after every charge, which is when either can rise in the
// model (a writer dirties only newly charged pages); a fall of usage is
// seen at the next charge. A threshold reports once; the watcher arms it
// again.

// SetWatchHook sets the function a crossed threshold calls, with the
// cgroup that crossed it. It must not run tasks: it schedules.
func (k *Kernel) SetWatchHook(f func(k *Kernel, m int32)) { k.onWatch = f }

// Watch arms m's thresholds in bytes: usage above usageAbove, and the
// cgroup's (hierarchical) dirtied-bytes counter above dirtiedAbove. A
// value of noLimit pages or more (memcg.NoLimit) is off; Watch
// replaces m's previous thresholds.
func (k *Kernel) Watch(m int32, usageAbove, dirtiedAbove uint64) {
	c := &k.memcgs[m]
	was := c.watchUsage != noLimit || c.watchDirtied != noLimit
	c.watchUsage, c.watchDirtied = bytesToWatch(usageAbove), bytesToWatch(dirtiedAbove)
	c.usageBelow = c.usage <= c.watchUsage
	now := c.watchUsage != noLimit || c.watchDirtied != noLimit
	switch {
	case now && !was:
		k.watches++
	case was && !now:
		k.watches--
	}
}

// WatchReclaim arms, or not, m's report of reclaim against its own limit,
// as memcgd's watch hears of it unless host.Wake.OnlyArmed: on v1 the
// "low,local" vmpressure event of the cgroup, signalled each time its
// reclaim has scanned a window of vmpressureWin pages (mm/vmpressure.c,
// vmpressure, vmpressure_work_fn), which the watch confirms by a change
// of memory.failcnt (a charge failed: here every limit reclaim follows
// one); on v2 a change of memory.events.local, whose "max" the kernel
// counts at each limit reclaim (mm/memcontrol.c, try_charge_memcg,
// memcg_memory_event) and notifies at most once per
// cgroupFileNotifyInterval (kernel/cgroup/cgroup.c, cgroup_file_notify).
// The report stays armed until WatchReclaim turns it off.
func (k *Kernel) WatchReclaim(m int32, on bool) {
	c := &k.memcgs[m]
	if c.watchReclaim != on {
		c.watchReclaim, c.reclaimScanned, c.reclaimNext = on, 0, 0
	}
}

const (
	// vmpressureWin is vmpressure_win: SWAP_CLUSTER_MAX * 16 pages.
	vmpressureWin = SwapClusterMax * 16
	// cgroupFileNotifyInterval is CGROUP_FILE_NOTIFY_MIN_INTV, HZ/100.
	// The kernel defers a notification that comes sooner to the end of
	// the interval; here it is dropped, and the next limit reclaim after
	// the interval reports, which for a cgroup at its limit comes within
	// the same interval.
	cgroupFileNotifyInterval = 10 * Millisecond
)

// reclaimReport tells the watcher of m's limit reclaim, if armed, of one
// that scanned scanned pages.
func (k *Kernel) reclaimReport(m int32, scanned int64) {
	c := &k.memcgs[m]
	if !c.watchReclaim || k.onWatch == nil {
		return
	}
	if k.cfg.CgroupVersion == 1 {
		c.reclaimScanned += scanned
		if c.reclaimScanned < vmpressureWin {
			return
		}
		c.reclaimScanned = 0
	} else {
		if k.now < c.reclaimNext {
			return
		}
		c.reclaimNext = k.now + cgroupFileNotifyInterval
	}
	k.onWatch(k, m)
}

// bytesToWatch is a byte threshold in pages: crossed once the page count
// is above it. noLimit is off.
func bytesToWatch(b uint64) int64 {
	if b >= memcg.NoLimit&^(PageSize-1) || b/PageSize >= uint64(noLimit) {
		return noLimit
	}
	return int64(b / PageSize)
}

// checkThresholds runs after a charge to m: m and every ancestor may have
// crossed a threshold.
func (k *Kernel) checkThresholds(m int32) {
	for c := m; c != nilIdx; c = k.memcgs[c].parent {
		mc := &k.memcgs[c]
		if mc.watchUsage == noLimit && mc.watchDirtied == noLimit {
			continue
		}
		// A usage threshold signals on crossing from below, as an
		// eventfd threshold does; usage already above it waits for a
		// fall and a rise.
		up := false
		if mc.usage <= mc.watchUsage {
			mc.usageBelow = true
		} else {
			up = mc.usageBelow
		}
		if up || mc.hev[meDirtied] > mc.watchDirtied {
			mc.watchUsage, mc.watchDirtied = noLimit, noLimit
			k.watches--
			if k.onWatch != nil {
				k.onWatch(k, c)
			}
		}
	}
}
