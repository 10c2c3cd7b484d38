package kernel

import "github.com/memcgd/memcgd/memcg"

// Memory cgroups (mm/memcontrol.c): a hierarchy of page counters, charging
// with a per-cgroup stock of pre-charged pages, limit reclaim with its
// retries, memory.high's reclaim and penalty, and the per-cgroup
// statistics memory.stat reports.

// Constants of mm/memcontrol.c and mm/internal.h.
const (
	// MemcgChargeBatch is MEMCG_CHARGE_BATCH (include/linux/memcontrol.h;
	// 64 since about 6.1, 32 before).
	MemcgChargeBatch = 64
	// MaxReclaimRetries is MAX_RECLAIM_RETRIES (mm/internal.h).
	MaxReclaimRetries = 16
	// PageAllocCostlyOrder is PAGE_ALLOC_COSTLY_ORDER: charges of at most
	// 1 << 3 pages retry for as long as reclaim makes progress.
	PageAllocCostlyOrder = 3
	// memcgMaxHighDelay is MEMCG_MAX_HIGH_DELAY_JIFFIES, 2 s.
	memcgMaxHighDelay = 2 * Second
)

// Per-memcg state items (enum node_stat_item / memcg_stat_item subset).
const (
	msInactiveAnon = iota // NR_INACTIVE_ANON, in lru order
	msActiveAnon
	msInactiveFile
	msActiveFile
	msFileDirty     // NR_FILE_DIRTY
	msFileWriteback // NR_WRITEBACK
	nrMemcgStat
)

// Per-memcg events (memcg_vm_event_stat plus v1's and seed 001's).
const (
	mePgpgin = iota
	mePgpgout
	mePgscanKswapd
	mePgscanDirect
	mePgstealKswapd
	mePgstealDirect
	mePgrefill
	mePgactivate
	mePgdeactivate
	mePgoutrun       // seed 001: background reclaim runs
	meAllocstall     // seed 001: direct (limit) reclaim invocations
	meEventsMax      // memory.events max
	meEventsHigh     // memory.events high
	meEventsOOM      // memory.events oom (the model charges by force instead of killing)
	meFailcnt        // v1 memory.failcnt
	meDirtied        // pages dirtied by the cgroup's tasks
	meWritten        // pages written back that the cgroup had dirtied
	meThrottled      // balance_dirty_pages pauses taken
	meProactiveSteal // pages freed through memory.reclaim (memcgd)
	meProactiveScan  // pages scanned by memory.reclaim
	nrMemcgEvent
)

// defaultKnobs are a new cgroup's knobs in the seed kernels: seed 004's
// memory.dirty_* at the vm.dirty_* defaults (vm_dirty_ratio 20,
// dirty_background_ratio 10 in mm/page-writeback.c), seed 001's
// min_free_kbytes sized from the limit, seed 000's write-out first on.
func defaultKnobs() memcg.Knobs {
	return memcg.Knobs{DirtyRatio: 20, DirtyBackgroundRatio: 10, MinFreeKbytes: memcg.MinFreeAuto, WritebackFirst: true}
}

// Memcg is one memory cgroup.
type Memcg struct {
	Name     string
	parent   int32
	children []int32
	depth    int

	usage, max, high int64 // pages; max is v1 limit_in_bytes or v2 memory.max
	stock            int64 // pre-charged pages (the per-CPU stock, one CPU)

	lru   [nrLRULists]lruList
	stat  [nrMemcgStat]int64 // local
	hstat [nrMemcgStat]int64 // hierarchical
	ev    [nrMemcgEvent]int64
	hev   [nrMemcgEvent]int64

	wbs []int32 // v2: its bdi_writeback per disk, -1 until created
	// dirtyInodes lists the inodes it owns that have dirty pages.
	dirtyInodes inodeList

	// Knobs are the seeds' per-cgroup knobs, used by the in-kernel
	// variants and by the memcgd variant's policy.
	Knobs memcg.Knobs

	kswapd memcgKswapd // seed 001
	// bgWriteout is set while seed 004's background write-out of this
	// cgroup's inodes is queued or running.
	bgWriteout bool
	// domainLimit is seed 004's trailing dirty limit (hard_dirty_limit).
	domainLimit int64
	limitStamp  Time

	// watchUsage and watchDirtied are a watcher's thresholds in pages
	// (memcontrol_threshold.go), noLimit when off.
	watchUsage, watchDirtied int64
	usageBelow               bool // usage was at or below watchUsage since armed
	// watchReclaim says a watcher hears of reclaim against the cgroup's
	// own limit; reclaimScanned is what that reclaim scanned since the
	// last report (v1), reclaimNext when the next may come (v2).
	watchReclaim   bool
	reclaimScanned int64
	reclaimNext    Time
	// frozen is cgroup.freeze (v2) or freezer.state FROZEN (v1), held
	// until thawed (cgroup_freezer.go).
	frozen bool
}

func (k *Kernel) addMemcg(parent int32, name string, max, high int64) int32 {
	id := int32(len(k.memcgs))
	m := Memcg{Name: name, parent: parent, max: max, high: high, Knobs: defaultKnobs(),
		dirtyInodes: inodeList{nilIdx, nilIdx}, watchUsage: noLimit, watchDirtied: noLimit}
	for i := range m.lru {
		m.lru[i] = lruList{head: nilIdx, tail: nilIdx}
	}
	m.wbs = make([]int32, len(k.disks))
	for i := range m.wbs {
		m.wbs[i] = nilIdx
	}
	if parent >= 0 {
		m.depth = k.memcgs[parent].depth + 1
		k.memcgs[parent].children = append(k.memcgs[parent].children, id)
	}
	k.memcgs = append(k.memcgs, m)
	return id
}

// modStat changes a state item of m and of every ancestor.
func (k *Kernel) modStat(m int32, s int, d int64) {
	k.memcgs[m].stat[s] += d
	for ; m != nilIdx; m = k.memcgs[m].parent {
		k.memcgs[m].hstat[s] += d
	}
}

// countEvent adds to an event counter of m and of every ancestor.
func (k *Kernel) countEvent(m int32, e int, d int64) {
	k.memcgs[m].ev[e] += d
	for ; m != nilIdx; m = k.memcgs[m].parent {
		k.memcgs[m].hev[e] += d
	}
}

func (k *Kernel) lruStat(m int32, l uint8, d int64) {
	k.modStat(m, msInactiveAnon+int(l), d)
	if l >= lruInactiveFile {
		k.node.filePages += d
	} else {
		k.node.anonPages += d
	}
}

// margin is mem_cgroup_margin(): pages chargeable before m's own limit.
func (k *Kernel) margin(m int32) int64 {
	c := &k.memcgs[m]
	if c.usage >= c.max {
		return 0
	}
	return c.max - c.usage
}

// counterTryCharge is page_counter_try_charge() over m and its ancestors:
// all or nothing; on failure it returns the cgroup whose limit refused and
// counts a failcnt there.
func (k *Kernel) counterTryCharge(m int32, n int64) (int32, bool) {
	for c := m; c != nilIdx; c = k.memcgs[c].parent {
		if k.memcgs[c].usage+n > k.memcgs[c].max {
			k.countEventLocal(c, meFailcnt, 1)
			for u := m; u != c; u = k.memcgs[u].parent {
				k.memcgs[u].usage -= n
			}
			return c, false
		}
		k.memcgs[c].usage += n
	}
	return nilIdx, true
}

func (k *Kernel) countEventLocal(m int32, e int, d int64) { k.memcgs[m].ev[e] += d }

func (k *Kernel) counterCharge(m int32, n int64) {
	for c := m; c != nilIdx; c = k.memcgs[c].parent {
		k.memcgs[c].usage += n
	}
}

func (k *Kernel) counterUncharge(m int32, n int64) {
	for c := m; c != nilIdx; c = k.memcgs[c].parent {
		k.memcgs[c].usage -= n
	}
}

// uncharge returns n pages of m (mem_cgroup_uncharge); they count as
// pgpgout.
func (k *Kernel) uncharge(m int32, n int64) {
	k.counterUncharge(m, n)
	k.countEvent(m, mePgpgout, n)
}

// drainStock is drain_all_stock() for m's subtree: the pre-charged pages
// go back.
func (k *Kernel) drainStock(m int32) {
	if s := k.memcgs[m].stock; s > 0 {
		k.memcgs[m].stock = 0
		k.counterUncharge(m, s)
	}
	for _, c := range k.memcgs[m].children {
		k.drainStock(c)
	}
}

// tryChargeMemcg is try_charge_memcg(): charge n pages to m for task t,
// reclaiming from whichever cgroup's limit refuses. It returns false when
// t must sleep first (reclaim throttled it, or it waits on writeback); t
// then retries the same charge when it wakes, with its retry budget kept.
func (k *Kernel) tryChargeMemcg(t *Task, m int32, n int64) bool {
	c := &k.memcgs[m]
	if c.stock >= n {
		c.stock -= n
		k.countEvent(m, mePgpgin, n)
		return true
	}
	batch := max(int64(MemcgChargeBatch), n)
	for {
		over, ok := k.counterTryCharge(m, batch)
		if ok {
			if batch > n {
				k.memcgs[m].stock += batch - n
			}
			k.countEvent(m, mePgpgin, n)
			t.nrRetries, t.drained = 0, false
			k.checkHigh(t, m, batch)
			return true
		}
		if batch > n {
			batch = n
			continue
		}
		k.countEvent(over, meEventsMax, 1)
		sc := scanControl{nrToReclaim: max(n, SwapClusterMax), target: over, task: t}
		k.limitReclaim(t, over, &sc)
		k.reclaimReport(over, sc.nrScanned)
		reclaimed := sc.nrReclaimed
		if sc.mustSleep() {
			k.sleepReclaim(t, &sc)
			return false
		}
		if k.margin(over) >= n {
			continue
		}
		if !t.drained {
			k.drainStock(over)
			t.drained = true
			continue
		}
		if reclaimed > 0 && n <= 1<<PageAllocCostlyOrder {
			continue
		}
		if t.nrRetries < MaxReclaimRetries {
			t.nrRetries++
			continue
		}
		// mem_cgroup_oom(): the model has no OOM killer; it records the
		// event and charges by force, as __GFP_NOFAIL would.
		k.countEvent(over, meEventsOOM, 1)
		k.counterCharge(m, n)
		k.countEvent(m, mePgpgin, n)
		t.nrRetries, t.drained = 0, false
		return true
	}
}

// checkHigh notes pages charged over memory.high for the task's return to
// user mode (v2).
func (k *Kernel) checkHigh(t *Task, m int32, batch int64) {
	for c := m; c != nilIdx; c = k.memcgs[c].parent {
		if k.memcgs[c].usage > k.memcgs[c].high {
			t.overHigh += batch
			return
		}
	}
}

// handleOverHigh is __mem_cgroup_handle_over_high(): reclaim the overage
// from every cgroup over its high up the tree, and sleep a penalty that
// grows with the square of the overage when reclaim cannot bring it down.
// It returns false if t was put to sleep.
func (k *Kernel) handleOverHigh(t *Task) bool {
	nr := t.overHigh
	t.overHigh = 0
	m := t.memcg
	inRetry := false
	retries := MaxReclaimRetries
	for {
		var reclaimed int64
		for c := m; c != nilIdx && k.memcgs[c].parent != nilIdx; c = k.memcgs[c].parent {
			if k.memcgs[c].usage <= k.memcgs[c].high {
				continue
			}
			k.countEvent(c, meEventsHigh, 1)
			want := nr
			if inRetry {
				want = SwapClusterMax
			}
			sc := scanControl{nrToReclaim: max(want, SwapClusterMax), target: c, task: t}
			k.shrinkMemcg(&sc)
			t.clock += sc.cost
			t.Stall += sc.cost
			reclaimed += sc.nrReclaimed
		}
		penalty := k.highDelay(m, nr)
		if penalty <= Second/100 {
			return true
		}
		if reclaimed > 0 || retries > 0 {
			if reclaimed == 0 {
				retries--
			}
			inRetry = true
			continue
		}
		k.sleep(t, t.clock+penalty, StopReclaim)
		return false
	}
}

// highDelay is calculate_high_delay() with mem_find_max_overage(): the
// penalty for nr pages charged at the worst overage up the tree.
func (k *Kernel) highDelay(m int32, nr int64) Time {
	var ov int64
	for c := m; c != nilIdx && k.memcgs[c].parent != nilIdx; c = k.memcgs[c].parent {
		u, h := k.memcgs[c].usage, k.memcgs[c].high
		if u > h {
			ov = max(ov, ((u-h)<<20)/max(h, 1))
		}
	}
	if ov == 0 {
		return 0
	}
	// ((ov * ov * HZ) >> 20 >> 14) * nr / MEMCG_CHARGE_BATCH jiffies.
	d := Time((ov*ov>>20)*int64(Second)>>14) * Time(nr) / MemcgChargeBatch
	return min(d, memcgMaxHighDelay)
}

// wbStats is mem_cgroup_wb_stats(): the file pages, dirty and writeback of
// m (hierarchical), and its headroom: the least room under min(max, high)
// of m and its ancestors below the root.
func (k *Kernel) wbStats(m int32) (filepages, headroom, dirty, writeback int64) {
	c := &k.memcgs[m]
	filepages = c.hstat[msInactiveFile] + c.hstat[msActiveFile]
	dirty = c.hstat[msFileDirty]
	writeback = c.hstat[msFileWriteback]
	headroom = noLimit
	for ; m != nilIdx && k.memcgs[m].parent != nilIdx; m = k.memcgs[m].parent {
		x := &k.memcgs[m]
		ceil := min(x.max, x.high)
		headroom = min(headroom, ceil-min(ceil, x.usage))
	}
	return
}
