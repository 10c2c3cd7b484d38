package kernel

// Reclaim (mm/vmscan.c), classic two-list LRU: do_try_to_free_pages()
// lowers the priority from DEF_PRIORITY until SWAP_CLUSTER_MAX pages are
// freed; shrink_lruvec() scans size >> priority pages of each file list in
// SWAP_CLUSTER_MAX batches; shrink_inactive_list() frees clean pages,
// marks dirty and writeback ones PG_reclaim and activates them, wakes the
// flushers when a whole batch was dirty, and, for cgroup v1 limit reclaim,
// throttles the reclaimer on writeback. There is no swap in the model, so
// anonymous pages are never scanned (get_scan_count's SCAN_FILE).

// Constants of mm/vmscan.c and include/linux/swap.h.
const (
	// SwapClusterMax is SWAP_CLUSTER_MAX, reclaim's batch.
	SwapClusterMax = 32
	// DefPriority is DEF_PRIORITY: the first pass scans 1/4096 of a list.
	DefPriority = 12
	// reclaimThrottleWriteback is reclaim_throttle(VMSCAN_THROTTLE_WRITEBACK)'s
	// timeout, HZ/10.
	reclaimThrottleWriteback = 100 * Millisecond
	// kswapdNap is kswapd_try_to_sleep()'s short nap, HZ/10.
	kswapdNap = 100 * Millisecond
)

// scanControl is struct scan_control plus what the model needs to hand a
// sleep back to the caller.
type scanControl struct {
	nrToReclaim int64
	target      int32 // memcg for cgroup reclaim, nilIdx for global reclaim
	kswapd      bool  // current_is_kswapd(), or seed 001's memcg kswapd
	priority    int
	task        *Task // the reclaiming task, nil for kernel threads

	nrScanned, nrReclaimed int64
	nrImmediate            int64
	cost                   Time // CPU time spent scanning

	throttle bool  // reclaim_throttle(VMSCAN_THROTTLE_WRITEBACK) requested
	waitIno  int32 // folio_wait_writeback(): wait for this inode's writeback ...
	waitSeq  int64 // ... to complete this many pages
}

func (sc *scanControl) cgroupReclaim() bool { return sc.target != nilIdx }

func (sc *scanControl) mustSleep() bool { return sc.throttle || sc.waitSeq > 0 }

// writebackThrottlingSane is writeback_throttling_sane(): false only for
// cgroup v1 limit reclaim, which has no dirty throttling to rely on.
func (k *Kernel) writebackThrottlingSane(sc *scanControl) bool {
	return !sc.cgroupReclaim() || k.cfg.CgroupVersion == 2
}

// shrinkInactiveList scans up to nr pages from the tail of m's inactive
// file list (shrink_inactive_list + shrink_folio_list).
func (k *Kernel) shrinkInactiveList(m int32, nr int64, sc *scanControl) {
	lst := &k.memcgs[m].lru[lruInactiveFile]
	var taken, unqueuedDirty, reclaimed int64
	for taken < nr && lst.tail != nilIdx {
		i := lst.tail
		if want := nr - taken; k.ext[i].n > want {
			i = k.splitFront(i, want)
			// splitFront put the piece behind i: it is the new tail.
		}
		k.lruDel(i)
		e := &k.ext[i]
		n := e.n
		taken += n
		switch {
		case e.state == stWriteback:
			switch {
			case sc.kswapd && e.flags&fReclaim != 0 && k.node.pgdatWriteback:
				sc.nrImmediate += n // case 1
			case k.writebackThrottlingSane(sc) || e.flags&fReclaim == 0:
				e.flags |= fReclaim // case 2
			default:
				// case 3: v1 limit reclaim met a page already marked for
				// reclaim: folio_wait_writeback().
				if sc.waitSeq == 0 && sc.task != nil {
					sc.waitIno, sc.waitSeq = e.ino, e.seqEnd
				}
			}
			k.activate(i)
		case e.state == stDirty:
			unqueuedDirty += n
			e.flags |= fReclaim
			k.node.vmstat[NrVmscanImmediateReclaim] += n
			k.activate(i)
		default:
			reclaimed += n
			k.freeFileExtent(i)
		}
	}
	sc.nrScanned += taken
	sc.nrReclaimed += reclaimed
	sc.cost += Time(taken) * k.cfg.ScanCostPerPage
	scan, steal := mePgscanDirect, mePgstealDirect
	gscan, gsteal := PgscanDirect, PgstealDirect
	if sc.kswapd {
		scan, steal = mePgscanKswapd, mePgstealKswapd
		gscan, gsteal = PgscanKswapd, PgstealKswapd
	}
	k.countEvent(m, scan, taken)
	k.countEvent(m, steal, reclaimed)
	if !sc.cgroupReclaim() {
		k.node.vmstat[gscan] += taken
		k.node.vmstat[gsteal] += reclaimed
	}
	if taken > 0 && unqueuedDirty == taken {
		k.wakeupFlusherThreads(WBReasonVmscan, m, sc)
		if !k.writebackThrottlingSane(sc) {
			sc.throttle = true
		}
	}
}

// activate puts extent i, off the LRU, at the head of its active list.
func (k *Kernel) activate(i int32) {
	e := &k.ext[i]
	e.flags |= fActive
	e.flags &^= fReferenced
	k.countEvent(e.memcg, mePgactivate, e.n)
	k.node.vmstat[Pgactivate] += e.n
	k.lruAddHead(i, lruActiveFile)
}

// freeFileExtent drops clean extent i, already off the LRU, from the page
// cache: __remove_mapping, uncharge and free.
func (k *Kernel) freeFileExtent(i int32) {
	e := &k.ext[i]
	k.inodes[e.ino].cached -= e.n
	k.uncharge(e.memcg, e.n)
	k.freeExtent(i)
}

// shrinkActiveList moves up to nr pages from the tail of m's active file
// list to its inactive list (shrink_active_list): unmapped page cache is
// deactivated whatever its referenced bit.
func (k *Kernel) shrinkActiveList(m int32, nr int64, sc *scanControl) {
	lst := &k.memcgs[m].lru[lruActiveFile]
	var moved int64
	for moved < nr && lst.tail != nilIdx {
		i := lst.tail
		if want := nr - moved; k.ext[i].n > want {
			i = k.splitFront(i, want)
		}
		k.lruDel(i)
		e := &k.ext[i]
		e.flags &^= fActive | fReferenced
		moved += e.n
		k.lruAddHead(i, lruInactiveFile)
	}
	k.countEvent(m, mePgrefill, moved)
	k.countEvent(m, mePgdeactivate, moved)
	k.node.vmstat[Pgrefill] += moved
	k.node.vmstat[Pgdeactivate] += moved
	sc.cost += Time(moved) * k.cfg.ScanCostPerPage
}

// inactiveIsLow is inactive_is_low() for the file lists.
func (k *Kernel) inactiveIsLow(m int32) bool {
	in := k.memcgs[m].lru[lruInactiveFile].pages
	act := k.memcgs[m].lru[lruActiveFile].pages
	gb := (in + act) >> (30 - PageShift)
	ratio := int64(1)
	if gb > 0 {
		ratio = int64(isqrt(uint64(10 * gb)))
	}
	return in*ratio < act
}

// shrinkLruvec scans m's file lists at sc.priority (shrink_lruvec with
// get_scan_count's SCAN_FILE).
func (k *Kernel) shrinkLruvec(m int32, sc *scanControl) {
	c := &k.memcgs[m]
	nrIn := c.lru[lruInactiveFile].pages >> sc.priority
	nrAct := c.lru[lruActiveFile].pages >> sc.priority
	deactivate := k.inactiveIsLow(m)
	for nrIn > 0 || nrAct > 0 {
		if nrIn > 0 {
			n := min(nrIn, SwapClusterMax)
			nrIn -= n
			k.shrinkInactiveList(m, n, sc)
		}
		if nrAct > 0 {
			n := min(nrAct, SwapClusterMax)
			nrAct -= n
			if deactivate {
				k.shrinkActiveList(m, n, sc)
			}
		}
		if sc.mustSleep() || sc.nrReclaimed >= sc.nrToReclaim {
			return
		}
	}
	if k.inactiveIsLow(m) {
		k.shrinkActiveList(m, SwapClusterMax, sc)
	}
}

// shrinkSubtree is shrink_node_memcgs() over the subtree of root, skipping
// subtrees without file pages.
func (k *Kernel) shrinkSubtree(root int32, sc *scanControl) {
	c := &k.memcgs[root]
	if c.hstat[msInactiveFile]+c.hstat[msActiveFile] == 0 {
		return
	}
	if c.stat[msInactiveFile]+c.stat[msActiveFile] > 0 {
		k.shrinkLruvec(root, sc)
	}
	for _, ch := range c.children {
		if sc.mustSleep() || (sc.nrReclaimed >= sc.nrToReclaim && !sc.kswapd) {
			return
		}
		k.shrinkSubtree(ch, sc)
	}
}

// doTryToFreePages is do_try_to_free_pages(): priority from DEF_PRIORITY
// down to 0 until nrToReclaim pages are freed or the reclaimer must sleep.
func (k *Kernel) doTryToFreePages(root int32, sc *scanControl) {
	for sc.priority = DefPriority; sc.priority >= 0; sc.priority-- {
		k.shrinkSubtree(root, sc)
		if sc.mustSleep() || sc.nrReclaimed >= sc.nrToReclaim {
			return
		}
	}
}

// shrinkMemcg is try_to_free_mem_cgroup_pages(): limit reclaim of
// sc.target's subtree.
func (k *Kernel) shrinkMemcg(sc *scanControl) {
	k.doTryToFreePages(sc.target, sc)
}

// limitReclaim is the stock limit reclaim a charge runs: seed 001 counts
// each invocation as an allocstall of the cgroup.
func (k *Kernel) limitReclaim(t *Task, m int32, sc *scanControl) {
	k.countEvent(m, meAllocstall, 1)
	k.shrinkMemcg(sc)
	t.clock += sc.cost
	t.Stall += sc.cost
}

// tryToFreePages is try_to_free_pages(): global direct reclaim.
func (k *Kernel) tryToFreePages(t *Task, sc *scanControl) {
	k.node.vmstat[AllocstallNormal]++
	k.doTryToFreePages(0, sc)
	t.clock += sc.cost
	t.Stall += sc.cost
}

// sleepReclaim puts t to sleep as reclaim asked: on one inode's writeback
// (folio_wait_writeback) or in reclaim_throttle(WRITEBACK), which ends
// after HZ/10 or once SWAP_CLUSTER_MAX pages per throttled task have been
// written.
func (k *Kernel) sleepReclaim(t *Task, sc *scanControl) {
	if sc.waitSeq > 0 && k.inodes[sc.waitIno].completed < sc.waitSeq {
		t.waitIno, t.waitSeq = sc.waitIno, sc.waitSeq
		k.inodes[sc.waitIno].waiters++
		k.block(t, StopReclaim)
		return
	}
	if !sc.throttle {
		return
	}
	k.throttleWriteback()
	t.throttled = true
	k.node.throttledTasks = append(k.node.throttledTasks, t.id)
	k.block(t, StopReclaim)
	k.heap.push(t.clock+reclaimThrottleWriteback, evThrottleTimeout, t.id, t.gen)
}

// throttleWriteback is the accounting half of reclaim_throttle(WRITEBACK).
func (k *Kernel) throttleWriteback() {
	n := &k.node
	n.nrWritebackThrottled++
	if n.nrWritebackThrottled == 1 {
		n.nrReclaimStart = n.vmstat[NrThrottledWritten]
	}
}

// acctReclaimWriteback is __acct_reclaim_writeback(): completed writeback
// wakes the throttled reclaimers once enough was written.
func (k *Kernel) acctReclaimWriteback(n int64) {
	nd := &k.node
	if nd.nrWritebackThrottled == 0 {
		return
	}
	nd.vmstat[NrThrottledWritten] += n
	if nd.vmstat[NrThrottledWritten]-nd.nrReclaimStart > SwapClusterMax*nd.nrWritebackThrottled {
		k.wakeThrottled()
	}
}

func (k *Kernel) wakeThrottled() {
	nd := &k.node
	for _, id := range nd.throttledTasks {
		t := k.tasks[id]
		if t.throttled {
			t.throttled = false
			k.wake(t)
		}
	}
	nd.throttledTasks = nd.throttledTasks[:0]
	nd.nrWritebackThrottled = 0
	for _, m := range nd.throttledKswapds {
		k.memcgs[m].kswapd.throttled = false
		k.opts.Seed001.wake(k, m, k.now)
	}
	nd.throttledKswapds = nd.throttledKswapds[:0]
}

// throttleTimeout ends one task's reclaim_throttle sleep.
func (k *Kernel) throttleTimeout(t *Task) {
	if !t.throttled {
		return
	}
	t.throttled = false
	k.node.nrWritebackThrottled--
	k.wake(t)
}

// kswapdRun is one pass of balance_pgdat() for the node: while free is
// under the high watermark, reclaim from every cgroup at falling priority;
// nap when a pass frees nothing.
func (k *Kernel) kswapdRun() {
	nd := &k.node
	nd.kswapdQueued = false
	if nd.free() >= nd.wmarkHigh {
		nd.kswapdAwake = false
		return
	}
	if !nd.kswapdAwake {
		nd.kswapdAwake = true
		nd.vmstat[Pageoutrun]++
	}
	sc := scanControl{nrToReclaim: max(nd.wmarkHigh-nd.free(), SwapClusterMax), target: nilIdx, kswapd: true}
	for sc.priority = DefPriority; sc.priority >= 1 && nd.free() < nd.wmarkHigh; sc.priority-- {
		k.shrinkSubtree(0, &sc)
	}
	nd.pgdatWriteback = sc.nrImmediate > 0
	next := k.now + max(sc.cost, Microsecond)
	if sc.nrReclaimed == 0 || sc.nrImmediate > 0 {
		next = k.now + kswapdNap
	}
	nd.kswapdQueued = true
	k.heap.push(next, evKswapd, 0, 0)
}

// wakeupKswapd is wakeup_kswapd().
func (k *Kernel) wakeupKswapd(at Time) {
	if k.node.kswapdQueued {
		return
	}
	k.node.kswapdQueued = true
	k.heap.push(at, evKswapd, 0, 0)
}

// ProactiveReclaim is memory.reclaim (user_proactive_reclaim): reclaim up
// to n pages from m's subtree in the writer's context, and report the
// pages freed. Reclaim that would throttle on writeback stops there: the
// model does not make the caller sleep.
func (k *Kernel) ProactiveReclaim(m int32, n int64) int64 {
	var total int64
	for tries := 0; total < n && tries < MaxReclaimRetries; tries++ {
		sc := scanControl{nrToReclaim: max(min(n-total, SwapClusterMax*32), SwapClusterMax), target: m}
		k.doTryToFreePages(m, &sc)
		total += sc.nrReclaimed
		k.countEvent(m, meProactiveSteal, sc.nrReclaimed)
		k.countEvent(m, meProactiveScan, sc.nrScanned)
		if sc.nrReclaimed == 0 || sc.mustSleep() {
			break
		}
	}
	return total
}
