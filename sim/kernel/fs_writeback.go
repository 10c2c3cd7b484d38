package kernel

// The flushers (fs/fs-writeback.c): one bdi_writeback per disk on cgroup v1
// and per (disk, memcg) on v2, each with its b_dirty, b_io and b_more_io
// inode lists, doing queued work first, then a "write everything" request
// (wakeup_flusher_threads), then periodic (kupdate) and background
// writeback, each inode a chunk at a time.

// Constants of fs/fs-writeback.c and mm/page-writeback.c.
const (
	// MinWritebackPages is MIN_WRITEBACK_PAGES, 4 MiB: chunks are
	// rounded to it.
	MinWritebackPages = 4096 >> (PageShift - 10)
	// DirtyScope is DIRTY_SCOPE: a chunk is at most dirty_limit / 8.
	DirtyScope = 8
)

// WB reasons (enum wb_reason).
const (
	WBReasonBackground uint8 = iota
	WBReasonVmscan
	WBReasonPeriodic
	WBReasonForeignFlush
	WBReasonTargeted // a seed patch's or memcgd's write-out of one cgroup's inodes
)

// inode list ids.
const (
	wbListNone uint8 = iota
	wbListDirty
	wbListIO
	wbListMoreIO
)

type inodeList struct{ head, tail int32 }

// wbWork is struct wb_writeback_work.
type wbWork struct {
	nrPages       int64
	memcg         int32 // only inodes owned by this cgroup's subtree; nilIdx: all
	reason        uint8
	forKupdate    bool
	forBackground bool
	memcgBg       bool // seed 004: stop when the cgroup is under its background threshold
	// caller says the write-out runs in the caller's context
	// (sync_file_range(SYNC_FILE_RANGE_WRITE): __filemap_fdatawrite_range
	// in mm/filemap.c), not the flusher's.
	caller bool
}

type bdiWriteback struct {
	disk  int32
	memcg int32 // 0 for the bdi's root wb
	lists [4]inodeList

	reclaimable int64 // WB_RECLAIMABLE: dirty pages of attached inodes
	writeback   int64 // WB_WRITEBACK
	written     int64 // WB_WRITTEN, cumulative
	dirtied     int64 // WB_DIRTIED, cumulative

	work      []wbWork
	cur       wbWork
	haveCur   bool
	chunkLeft int64 // pages left of the current inode's chunk
	startAll  bool
	blocked   bool // waiting for a free disk request
	queuedAt  Time // when a flusher event is queued; -1 if none
	// ownAt is when the flusher itself is woken (wb_wakeup,
	// wb_wakeup_delayed: work of its own, a periodic or background
	// flush); -1 if it is not. Only such a run goes on to periodic and
	// background writeback once its queue is done (wb_do_writeback());
	// a write-out in a caller's context (sync_file_range) is no
	// flusher run at all.
	ownAt Time
	gen   uint32

	lastOldFlush Time

	bw wbBandwidth
	// completions is the wb's decayed writeback completions in the global
	// domain (fprop), for its share of the thresholds.
	completions   int64
	complPeriod   int64
	dirtyExceeded bool
}

// wbFor returns the wb an inode dirtied by memcg m attaches to
// (inode_attach_wb): the bdi's root wb on v1, m's own on v2.
func (k *Kernel) wbFor(disk int32, m int32) int32 {
	if k.cfg.CgroupVersion == 1 || m == 0 {
		return k.rootWB[disk]
	}
	if w := k.memcgs[m].wbs[disk]; w != nilIdx {
		return w
	}
	w := k.newWB(disk, m)
	k.memcgs[m].wbs[disk] = w
	return w
}

func (k *Kernel) newWB(disk, m int32) int32 {
	w := bdiWriteback{disk: disk, memcg: m, queuedAt: -1, ownAt: -1, bw: newWBBandwidth(k.now)}
	for i := range w.lists {
		w.lists[i] = inodeList{nilIdx, nilIdx}
	}
	w.lastOldFlush = k.now
	k.wbs = append(k.wbs, w)
	return int32(len(k.wbs) - 1)
}

func (k *Kernel) inodeListAdd(w int32, l uint8, ino int32) {
	in := &k.inodes[ino]
	lst := &k.wbs[w].lists[l]
	in.list = l
	in.lnext = nilIdx
	in.lprev = lst.tail
	if lst.tail != nilIdx {
		k.inodes[lst.tail].lnext = ino
	} else {
		lst.head = ino
	}
	lst.tail = ino
}

func (k *Kernel) inodeListDel(w int32, ino int32) {
	in := &k.inodes[ino]
	if in.list == wbListNone {
		return
	}
	lst := &k.wbs[w].lists[in.list]
	if in.lprev != nilIdx {
		k.inodes[in.lprev].lnext = in.lnext
	} else {
		lst.head = in.lnext
	}
	if in.lnext != nilIdx {
		k.inodes[in.lnext].lprev = in.lprev
	} else {
		lst.tail = in.lprev
	}
	in.list, in.lprev, in.lnext = wbListNone, nilIdx, nilIdx
}

// markInodeDirty is __mark_inode_dirty(): the first dirtying stamps
// dirtied_when and puts the inode on b_dirty; a wb without dirty IO arms
// its periodic writeback (wb_wakeup_delayed).
func (k *Kernel) markInodeDirty(ino int32, now Time) {
	in := &k.inodes[ino]
	if in.list != wbListNone {
		return
	}
	w := in.wb
	hadDirty := k.wbHasDirtyIO(w)
	in.dirtiedWhen = now
	k.inodeListAdd(w, wbListDirty, ino)
	if !hadDirty {
		k.queueFlusher(w, now+k.cfg.DirtyWritebackInterval)
	}
}

func (k *Kernel) wbHasDirtyIO(w int32) bool {
	l := &k.wbs[w].lists
	return l[wbListDirty].head != nilIdx || l[wbListIO].head != nilIdx || l[wbListMoreIO].head != nilIdx
}

// queueFlusher makes wb w's flusher run at time at, unless it already will
// by then.
func (k *Kernel) queueFlusher(w int32, at Time) {
	wb := &k.wbs[w]
	if wb.ownAt < 0 || at < wb.ownAt {
		wb.ownAt = at
	}
	k.queueRun(w, at)
}

// queueRun makes wb w's queue run at time at, unless it already will by
// then, without waking the flusher for work of its own.
func (k *Kernel) queueRun(w int32, at Time) {
	wb := &k.wbs[w]
	if wb.blocked {
		return
	}
	if wb.queuedAt >= 0 && wb.queuedAt <= at {
		return
	}
	wb.gen++
	wb.queuedAt = at
	k.heap.push(at, evFlusher, w, wb.gen)
}

// wbStartWriteback is wb_start_writeback(): ask w to write everything.
func (k *Kernel) wbStartWriteback(w int32, reason uint8) {
	wb := &k.wbs[w]
	if !wb.startAll {
		wb.startAll = true
		k.node.wbStartAll[reason]++
	}
	k.queueFlusher(w, k.now)
}

// wbQueueWork queues a work item on w (wb_queue_work). Work in a
// caller's context (wbWork.caller) runs on the same queue, for the disk's
// sake, but does not wake the flusher.
func (k *Kernel) wbQueueWork(w int32, work wbWork) {
	k.wbs[w].work = append(k.wbs[w].work, work)
	if work.caller {
		k.queueRun(w, k.now)
		return
	}
	k.queueFlusher(w, k.now)
}

// writebackInProgress is writeback_in_progress(): the flusher has work.
func (k *Kernel) writebackInProgress(w int32) bool {
	wb := &k.wbs[w]
	return wb.haveCur || wb.startAll || len(wb.work) > 0 || wb.blocked
}

// wbStartBackgroundWriteback is wb_start_background_writeback().
func (k *Kernel) wbStartBackgroundWriteback(w int32) { k.queueFlusher(w, k.now) }

// wakeupFlusherThreads is wakeup_flusher_threads(): every wb with dirty IO
// writes everything. Seed 000 first tries the reclaiming cgroup's own.
func (k *Kernel) wakeupFlusherThreads(reason uint8, lruMemcg int32, sc *scanControl) {
	if o := k.opts.Seed000; o != nil && reason == WBReasonVmscan {
		m := lruMemcg
		if sc.cgroupReclaim() {
			m = sc.target
		}
		if o.flushMemcgFirst(k, m) {
			return
		}
	}
	for w := range k.wbs {
		if k.wbHasDirtyIO(int32(w)) {
			k.wbStartWriteback(int32(w), reason)
		}
	}
}

// WriteoutMemcg queues write-out of the dirty inodes owned by m's subtree
// on every disk (what memcgd's targeted write-out and the seeds' per-cgroup
// write-out do); it returns how many dirty pages m held.
func (k *Kernel) WriteoutMemcg(m int32, reason uint8, background bool) int64 {
	return k.writeoutMemcg(m, wbWork{reason: reason, memcgBg: background})
}

// SyncMemcg is memcgd's targeted write-out: sync_file_range of the dirty
// inodes owned by m's subtree, in the caller's context, which wakes no
// flusher; it returns how many dirty pages m held.
func (k *Kernel) SyncMemcg(m int32) int64 {
	return k.writeoutMemcg(m, wbWork{reason: WBReasonTargeted, caller: true})
}

func (k *Kernel) writeoutMemcg(m int32, work wbWork) int64 {
	dirty := k.memcgs[m].hstat[msFileDirty]
	if dirty == 0 {
		return 0
	}
	for di := range k.disks {
		for w := range k.wbs {
			wb := &k.wbs[w]
			if wb.disk != int32(di) {
				continue
			}
			if k.cfg.CgroupVersion == 2 && !k.isAncestor(m, wb.memcg) {
				continue
			}
			work.nrPages, work.memcg = dirty+dirty/4, m
			k.wbQueueWork(int32(w), work)
		}
	}
	return dirty
}

// FlushAll is wakeup_flusher_threads() for a reason outside reclaim.
func (k *Kernel) FlushAll(reason uint8) {
	for w := range k.wbs {
		if k.wbHasDirtyIO(int32(w)) {
			k.wbStartWriteback(int32(w), reason)
		}
	}
}

func (k *Kernel) isAncestor(a, m int32) bool {
	for ; m != nilIdx; m = k.memcgs[m].parent {
		if m == a {
			return true
		}
	}
	return false
}

// flusherRun is wb_workfn(): do work until there is none or the disk
// queue is full.
func (k *Kernel) flusherRun(w int32) {
	wb := &k.wbs[w]
	wb.queuedAt = -1
	for {
		if !wb.haveCur && !k.nextWork(w) {
			if wb.ownAt >= 0 && wb.ownAt <= k.now {
				wb.ownAt = -1
			}
			break
		}
		if !k.writebackWork(w) {
			return // blocked on the disk; ioDone resumes us
		}
	}
	if k.wbHasDirtyIO(w) {
		// wb_wakeup_delayed(): come back for periodic writeback.
		k.queueFlusher(w, max(k.now+Millisecond, k.wbs[w].lastOldFlush+k.cfg.DirtyWritebackInterval))
	}
}

// nextWork picks the next work item as wb_do_writeback() does.
func (k *Kernel) nextWork(w int32) bool {
	wb := &k.wbs[w]
	switch {
	case len(wb.work) > 0:
		wb.cur = wb.work[0]
		copy(wb.work, wb.work[1:])
		wb.work = wb.work[:len(wb.work)-1]
	case wb.startAll:
		wb.startAll = false
		wb.cur = wbWork{nrPages: wb.reclaimable, memcg: nilIdx, reason: WBReasonVmscan}
	case wb.ownAt < 0 || k.now < wb.ownAt:
		return false // a caller's write-out is done; the flusher was not woken
	case k.cfg.DirtyWritebackInterval > 0 && k.now >= wb.lastOldFlush+k.cfg.DirtyWritebackInterval:
		wb.lastOldFlush = k.now
		wb.cur = wbWork{nrPages: wb.reclaimable, memcg: nilIdx, reason: WBReasonPeriodic, forKupdate: true}
	case k.wbHasDirtyIO(w) && k.wbOverBgThresh(w):
		// wb_writeback() ends a pass that makes no progress, and a wb
		// without dirty inodes (an fsync cleaned them) makes none.
		wb.cur = wbWork{nrPages: noLimit, memcg: nilIdx, reason: WBReasonBackground, forBackground: true}
	default:
		return false
	}
	wb.haveCur = true
	k.queueIO(w)
	return true
}

// queueIO is queue_io(): b_more_io goes onto b_io, then the inodes from
// b_dirty that this work may write (expired ones for kupdate).
func (k *Kernel) queueIO(w int32) {
	wb := &k.wbs[w]
	for ino := wb.lists[wbListMoreIO].head; ino != nilIdx; {
		next := k.inodes[ino].lnext
		k.inodeListDel(w, ino)
		k.inodeListAdd(w, wbListIO, ino)
		ino = next
	}
	before := k.now
	if wb.cur.forKupdate {
		before = k.now - k.cfg.DirtyExpireInterval
	}
	for ino := wb.lists[wbListDirty].head; ino != nilIdx; {
		in := &k.inodes[ino]
		if in.dirtiedWhen > before {
			break // b_dirty is in dirtied_when order
		}
		next := in.lnext
		k.inodeListDel(w, ino)
		k.inodeListAdd(w, wbListIO, ino)
		ino = next
	}
}

// writebackWork runs wb_writeback() for the current work item. It returns
// false if the disk queue filled up.
func (k *Kernel) writebackWork(w int32) bool {
	wb := &k.wbs[w]
	for {
		cur := &wb.cur
		if cur.nrPages <= 0 || (cur.forBackground && !k.wbOverBgThresh(w)) ||
			(cur.memcgBg && !k.opts.Seed004.overBg(k, cur.memcg)) ||
			((cur.forBackground || cur.forKupdate) && len(wb.work) > 0) {
			k.finishWork(w)
			return true
		}
		ino := k.nextInode(w, cur.memcg)
		if ino == nilIdx {
			if wb.lists[wbListMoreIO].head != nilIdx && k.hasEligible(w, wbListMoreIO, cur.memcg) {
				k.queueIO(w)
				continue
			}
			k.finishWork(w)
			return true
		}
		if wb.chunkLeft == 0 {
			wb.chunkLeft = k.writebackChunkSize(w, cur)
		}
		written, full := k.writebackInode(ino, wb.chunkLeft)
		cur.nrPages -= written
		wb.chunkLeft -= written
		if full {
			wb.blocked = true
			k.disks[wb.disk].blocked = append(k.disks[wb.disk].blocked, w)
			return false
		}
		wb.chunkLeft = 0
		if cur.memcg != nilIdx {
			// Targeted work leaves the wb's lists alone; a cleaned
			// inode drops off them when the flusher next meets it.
			if k.inodes[ino].dirty.pages > 0 {
				// Next round goes to the cgroup's next inode.
				k.memcgInodeDel(ino)
				k.memcgInodeAdd(ino)
			}
			continue
		}
		// requeue_inode(): still dirty → b_more_io; clean → off the lists.
		k.inodeListDel(w, ino)
		if k.inodes[ino].dirty.pages > 0 {
			k.inodeListAdd(w, wbListMoreIO, ino)
		}
	}
}

func (k *Kernel) finishWork(w int32) {
	wb := &k.wbs[w]
	wb.haveCur = false
	wb.chunkLeft = 0
	if wb.cur.memcgBg {
		k.memcgs[wb.cur.memcg].bgWriteout = false
	}
}

// nextInode is the next inode this work writes: the head of b_io, or for
// work targeted at a cgroup the first dirty inode its subtree owns on this
// wb (found through the cgroups' own lists, not by scanning b_io past
// every other cgroup's inodes).
func (k *Kernel) nextInode(w int32, filter int32) int32 {
	if filter == nilIdx {
		return k.wbs[w].lists[wbListIO].head
	}
	return k.memcgDirtyInode(filter, w)
}

func (k *Kernel) memcgDirtyInode(m, w int32) int32 {
	c := &k.memcgs[m]
	if c.hstat[msFileDirty] == 0 {
		return nilIdx
	}
	for ino := c.dirtyInodes.head; ino != nilIdx; ino = k.inodes[ino].mnext {
		if k.inodes[ino].wb == w && k.inodes[ino].dirty.pages > 0 {
			return ino
		}
	}
	for _, ch := range c.children {
		if ino := k.memcgDirtyInode(ch, w); ino != nilIdx {
			return ino
		}
	}
	return nilIdx
}

func (k *Kernel) hasEligible(w int32, l uint8, filter int32) bool {
	if filter != nilIdx {
		return false
	}
	return k.wbs[w].lists[l].head != nilIdx
}

// memcgInodeAdd puts ino on its owner's dirty-inode list.
func (k *Kernel) memcgInodeAdd(ino int32) {
	in := &k.inodes[ino]
	lst := &k.memcgs[in.owner].dirtyInodes
	in.onMemcg = true
	in.mnext = nilIdx
	in.mprev = lst.tail
	if lst.tail != nilIdx {
		k.inodes[lst.tail].mnext = ino
	} else {
		lst.head = ino
	}
	lst.tail = ino
}

// memcgInodeDel takes ino off its owner's dirty-inode list.
func (k *Kernel) memcgInodeDel(ino int32) {
	in := &k.inodes[ino]
	if !in.onMemcg {
		return
	}
	lst := &k.memcgs[in.owner].dirtyInodes
	if in.mprev != nilIdx {
		k.inodes[in.mprev].mnext = in.mnext
	} else {
		lst.head = in.mnext
	}
	if in.mnext != nilIdx {
		k.inodes[in.mnext].mprev = in.mprev
	} else {
		lst.tail = in.mprev
	}
	in.onMemcg, in.mprev, in.mnext = false, nilIdx, nilIdx
}

// writebackChunkSize is writeback_chunk_size() for WB_SYNC_NONE work:
// min(avg_write_bandwidth / 2, global dirty_limit / DIRTY_SCOPE), capped by
// the work, rounded to MIN_WRITEBACK_PAGES.
func (k *Kernel) writebackChunkSize(w int32, cur *wbWork) int64 {
	pages := min(k.wbs[w].bw.avgWriteBandwidth/2, k.globalDomain.dirtyLimit/DirtyScope)
	pages = min(pages, cur.nrPages)
	return (pages + MinWritebackPages) / MinWritebackPages * MinWritebackPages
}

// writebackInode writes up to n dirty pages of ino, in the order they were
// dirtied (do_writepages with folio_clear_dirty_for_io and
// folio_start_writeback), in requests of at most MaxRequestPages. It
// returns the pages started and whether the disk queue filled up.
func (k *Kernel) writebackInode(ino int32, n int64) (int64, bool) {
	in := &k.inodes[ino]
	di := in.disk
	d := &k.disks[di]
	var done int64
	for done < n && in.dirty.head != nilIdx {
		if d.full() {
			return done, true
		}
		req := min(n-done, d.cfg.MaxRequestPages)
		got := k.startWriteback(ino, req)
		if got == 0 {
			break
		}
		k.submit(di, k.now, request{pages: got, ino: ino, task: -1})
		done += got
	}
	return done, false
}

// startWriteback moves up to n pages from the head of ino's dirty list to
// its writeback list (__folio_start_writeback).
func (k *Kernel) startWriteback(ino int32, n int64) int64 {
	in := &k.inodes[ino]
	var got int64
	for got < n && in.dirty.head != nilIdx {
		i := in.dirty.head
		if want := n - got; k.ext[i].n > want {
			i = k.splitFront(i, want)
		}
		e := &k.ext[i]
		k.listDel(&in.dirty, i)
		e.state = stWriteback
		in.submitted += e.n
		e.seqEnd = in.submitted
		k.listAppend(&in.wback, i)
		k.modStat(e.memcg, msFileDirty, -e.n)
		k.modStat(e.memcg, msFileWriteback, e.n)
		wb := &k.wbs[in.wb]
		wb.reclaimable -= e.n
		wb.writeback += e.n
		got += e.n
	}
	if in.dirty.pages == 0 {
		k.memcgInodeDel(ino)
	}
	return got
}

// endWriteback finishes n pages of ino's writeback, oldest first
// (__folio_end_writeback, folio_end_writeback): pages marked for reclaim
// go to the inactive tail (folio_rotate_reclaimable).
func (k *Kernel) endWriteback(ino int32, n int64) {
	in := &k.inodes[ino]
	left := n
	for left > 0 && in.wback.head != nilIdx {
		i := in.wback.head
		if k.ext[i].n > left {
			i = k.splitFront(i, left)
		}
		e := &k.ext[i]
		k.listDel(&in.wback, i)
		e.state = stClean
		left -= e.n
		k.modStat(e.memcg, msFileWriteback, -e.n)
		k.countEvent(e.memcg, meWritten, e.n)
		if e.flags&fReclaim != 0 {
			e.flags &^= fReclaim
			k.lruDel(i)
			e.flags &^= fActive
			k.node.vmstat[Pgrotated] += e.n
			k.lruAddTail(i, lruInactiveFile)
		} else {
			k.mergeClean(i)
		}
	}
	done := n - left
	in.completed += done
	wb := &k.wbs[in.wb]
	wb.writeback -= done
	wb.written += done
	k.node.vmstat[NrWritten] += done
	k.wbWriteoutInc(in.wb, done)
	k.acctReclaimWriteback(done)
	if in.waiters > 0 {
		k.wakeInodeWaiters(ino)
	}
}

// mergeClean folds clean extent i into its LRU neighbour towards the tail
// when they continue each other, so that cleaned runs do not stay split
// into request-sized pieces.
func (k *Kernel) mergeClean(i int32) {
	e := &k.ext[i]
	j := e.next
	if j == nilIdx {
		return
	}
	f := &k.ext[j]
	if f.ino != e.ino || f.state != stClean || f.flags != e.flags || f.lru != e.lru || f.pgoff+f.n != e.pgoff {
		return
	}
	// j (older, lower offsets) absorbs i.
	n := e.n
	k.lruDel(i)
	f.n += n
	k.memcgs[f.memcg].lru[f.lru].pages += n
	k.lruStat(f.memcg, f.lru, n)
	k.freeExtent(i)
}

func (k *Kernel) wakeInodeWaiters(ino int32) {
	in := &k.inodes[ino]
	for _, t := range k.tasks {
		if t.waitSeq > 0 && t.waitIno == ino && in.completed >= t.waitSeq {
			t.waitSeq = 0
			in.waiters--
			k.wake(t)
		}
	}
}
