package kernel

// The page cache (mm/filemap.c) and the LRU lists it feeds (mm/swap.c),
// held as extents: runs of pages of one inode (or of anonymous memory)
// that share an LRU list, a state (clean, dirty, writeback) and flags.
// The kernel keeps a struct folio per page; the model keeps one extent per
// run and splits a run only where the kernel would treat its pages
// differently (reclaim isolates SWAP_CLUSTER_MAX pages, the flusher writes
// a chunk). A sequential writer's gigabytes are then a few thousand
// extents, and no operation allocates per page: extents live in an arena
// and are linked by int32 index, so the garbage collector scans nothing.

// Page states of an extent.
const (
	stClean uint8 = iota
	stDirty
	stWriteback
)

// Extent flags, after the page flags they stand for.
const (
	fActive     uint8 = 1 << iota // PG_active
	fReferenced                   // PG_referenced
	fReclaim                      // PG_reclaim: reclaim wants it once writeback ends
	fAnon                         // anonymous memory (PageAnon)
)

// LRU list indices, as enum lru_list in include/linux/mmzone.h.
const (
	lruInactiveAnon = iota
	lruActiveAnon
	lruInactiveFile
	lruActiveFile
	nrLRULists
)

const nilIdx int32 = -1

type extent struct {
	pgoff  int64 // first page
	n      int64 // pages
	seqEnd int64 // under writeback: the inode's submitted count at the end of this run
	ino    int32 // inode, or -1 for anon
	memcg  int32
	prev   int32 // LRU neighbours: prev is towards the head (newer), next towards the tail
	next   int32
	iprev  int32 // neighbours on the inode's dirty or writeback list
	inext  int32
	lru    uint8
	state  uint8
	flags  uint8
}

// lruList is one LRU list: head is the most recently added extent, tail the
// oldest, which reclaim takes first.
type lruList struct {
	head, tail int32
	pages      int64
}

// extList is an inode's list of dirty or writeback extents, in the order
// they became so (which is page order for a sequential writer).
type extList struct {
	head, tail int32
	pages      int64
}

// Inode is one file's page cache.
type inode struct {
	disk   int32
	wb     int32 // attached bdi_writeback, -1 before the first dirtying
	owner  int32 // memcg that first dirtied it (inode_attach_wb's folio memcg)
	dirty  extList
	wback  extList
	cached int64

	// submitted and completed count pages sent to and finished by the
	// disk; a reclaimer waiting on an extent waits for completed to reach
	// its seqEnd.
	submitted, completed int64
	waiters              int // reclaimers waiting on its writeback

	dirtiedWhen Time
	// onMemcg says the inode is on its owner's list of inodes with dirty
	// pages (mprev, mnext), which targeted write-out walks.
	onMemcg      bool
	mprev, mnext int32
	list         uint8 // which wb list the inode is on (wbListNone, ...)
	lprev        int32 // neighbours on that list
	lnext        int32
}

func (k *Kernel) allocExtent() int32 {
	if k.extFree != nilIdx {
		i := k.extFree
		k.extFree = k.ext[i].next
		return i
	}
	k.ext = append(k.ext, extent{})
	return int32(len(k.ext) - 1)
}

func (k *Kernel) freeExtent(i int32) {
	k.ext[i] = extent{next: k.extFree}
	k.extFree = i
}

// lruAddHead puts extent i at the head of list l of its memcg's lruvec.
func (k *Kernel) lruAddHead(i int32, l uint8) {
	e := &k.ext[i]
	lst := &k.memcgs[e.memcg].lru[l]
	e.lru = l
	e.prev = nilIdx
	e.next = lst.head
	if lst.head != nilIdx {
		k.ext[lst.head].prev = i
	} else {
		lst.tail = i
	}
	lst.head = i
	lst.pages += e.n
	k.lruStat(e.memcg, l, e.n)
}

// lruAddTail puts extent i at the tail of list l (folio_rotate_reclaimable).
func (k *Kernel) lruAddTail(i int32, l uint8) {
	e := &k.ext[i]
	lst := &k.memcgs[e.memcg].lru[l]
	e.lru = l
	e.next = nilIdx
	e.prev = lst.tail
	if lst.tail != nilIdx {
		k.ext[lst.tail].next = i
	} else {
		lst.head = i
	}
	lst.tail = i
	lst.pages += e.n
	k.lruStat(e.memcg, l, e.n)
}

func (k *Kernel) lruDel(i int32) {
	e := &k.ext[i]
	lst := &k.memcgs[e.memcg].lru[e.lru]
	if e.prev != nilIdx {
		k.ext[e.prev].next = e.next
	} else {
		lst.head = e.next
	}
	if e.next != nilIdx {
		k.ext[e.next].prev = e.prev
	} else {
		lst.tail = e.prev
	}
	lst.pages -= e.n
	k.lruStat(e.memcg, e.lru, -e.n)
	e.prev, e.next = nilIdx, nilIdx
}

func (k *Kernel) listAppend(l *extList, i int32) {
	e := &k.ext[i]
	e.inext = nilIdx
	e.iprev = l.tail
	if l.tail != nilIdx {
		k.ext[l.tail].inext = i
	} else {
		l.head = i
	}
	l.tail = i
	l.pages += e.n
}

func (k *Kernel) listDel(l *extList, i int32) {
	e := &k.ext[i]
	if e.iprev != nilIdx {
		k.ext[e.iprev].inext = e.inext
	} else {
		l.head = e.inext
	}
	if e.inext != nilIdx {
		k.ext[e.inext].iprev = e.iprev
	} else {
		l.tail = e.iprev
	}
	l.pages -= e.n
	e.iprev, e.inext = nilIdx, nilIdx
}

// stateList is the inode list an extent in state st belongs on, if any.
func (k *Kernel) stateList(e *extent) *extList {
	if e.ino < 0 {
		return nil
	}
	switch e.state {
	case stDirty:
		return &k.inodes[e.ino].dirty
	case stWriteback:
		return &k.inodes[e.ino].wback
	}
	return nil
}

// splitFront cuts the first n pages of extent i off into a new extent that
// takes i's place just behind it on the LRU (towards the tail) and just
// before it on the inode's list, and returns the new extent. i keeps the
// rest. The caller guarantees 0 < n < ext[i].n.
func (k *Kernel) splitFront(i int32, n int64) int32 {
	j := k.allocExtent()
	e := &k.ext[i]
	f := &k.ext[j]
	*f = *e
	f.n = n
	f.seqEnd = e.seqEnd - (e.n - n)
	e.pgoff += n
	e.n -= n
	// LRU: j goes between i and i.next (j is older, i.e. towards the tail);
	// the list's page count is unchanged.
	f.prev = i
	f.next = e.next
	if e.next != nilIdx {
		k.ext[e.next].prev = j
	} else {
		k.memcgs[e.memcg].lru[e.lru].tail = j
	}
	e.next = j
	// Inode list: j goes before i.
	if l := k.stateList(e); l != nil {
		f.inext = i
		f.iprev = e.iprev
		if e.iprev != nilIdx {
			k.ext[e.iprev].inext = j
		} else {
			l.head = j
		}
		e.iprev = j
	}
	return j
}

// mergeableHead reports whether extent i at a list head could absorb n
// more pages at page pgoff of inode ino in state st with flags fl.
func (k *Kernel) mergeableHead(i int32, ino int32, pgoff int64, st, fl uint8) bool {
	if i == nilIdx {
		return false
	}
	e := &k.ext[i]
	return e.ino == ino && e.state == st && e.flags == fl && e.pgoff+e.n == pgoff
}

// addPages puts n new pages at pgoff of inode ino (ino < 0: anonymous) on
// memcg's LRU, in state st: filemap_add_folio + folio_add_lru, with
// folio_mark_dirty for a write. A run contiguous with the list head
// grows it instead of adding an extent.
func (k *Kernel) addPages(memcg, ino int32, pgoff, n int64, st, fl uint8) {
	l := uint8(lruInactiveFile)
	if ino < 0 {
		l = lruInactiveAnon
		fl |= fAnon
	}
	if fl&fActive != 0 {
		l++
	}
	m := &k.memcgs[memcg]
	h := m.lru[l].head
	if k.mergeableHead(h, ino, pgoff, st, fl) && (st != stDirty || k.inodes[ino].dirty.tail == h) {
		e := &k.ext[h]
		e.n += n
		m.lru[l].pages += n
		k.lruStat(memcg, l, n)
		if st == stDirty {
			k.inodes[ino].dirty.pages += n
		}
		return
	}
	i := k.allocExtent()
	k.ext[i] = extent{pgoff: pgoff, n: n, ino: ino, memcg: memcg, state: st, flags: fl,
		prev: nilIdx, next: nilIdx, iprev: nilIdx, inext: nilIdx}
	k.lruAddHead(i, l)
	if st == stDirty {
		k.listAppend(&k.inodes[ino].dirty, i)
	}
}
