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
