package kernel

// The dirty throttle of kernels before 3.2, as 2.6.33 had it
// (mm/page-writeback.c, balance_dirty_pages before Wu Fengguang's
// IO-less throttling): a dirtier over its bdi's share of the dirty limit
// writes back pages itself (writeback_inodes_wbc, write_chunk pages),
// blocking on a full request queue as submit_bio does, and sleeps in
// congestion_wait(BLK_RW_ASYNC, HZ/10) until it has "done its duty". It
// is an option only to test the explanation the seed 004 thread invites
// for Vivek Goyal's anomaly (docs/sim.md); the stock model is the 6.x
// throttle of page_writeback.go.
//
// Simplifications: the dirtier writes its own last inode (dd's only
// file); congestion_wait sleeps its whole timeout unless the queue is
// congested, when a completion ends it (2.6.33 had no
// wait_iff_congested).

// Throttle2633 selects the 2.6.33 throttle.
type Throttle2633 struct{}

const (
	// ratelimitPages2633 is ratelimit_pages as writeback_set_ratelimit()
	// sizes it on machines of more than a few hundred MB: capped at 4 MB.
	ratelimitPages2633 = 4 << 20 >> PageShift
	// dirtyExceededRatelimit2633 is the ratelimit of
	// balance_dirty_pages_ratelimited_nr() while dirty_exceeded.
	dirtyExceededRatelimit2633 = 8
	// writeChunk2633 is sync_writeback_pages(): ratelimit_pages * 3 / 2.
	writeChunk2633 = ratelimitPages2633 + ratelimitPages2633/2
	// congestionWait2633 is congestion_wait(BLK_RW_ASYNC, HZ/10).
	congestionWait2633 = 100 * Millisecond
)

// balanceDirtyPages2633 is one pass of 2.6.33's loop; it returns false
// when the task sleeps (and comes back here when it wakes).
func (k *Kernel) balanceDirtyPages2633(t *Task, w int32) bool {
	g := k.globalDtc()
	k.wbDirtyLimits(w, &g, false)
	if k.memcgs[0].hstat[msFileDirty] > g.bgThresh && !k.writebackInProgress(w) {
		k.wbStartBackgroundWriteback(w)
	}
	t.nrDirtied = 0
	// "if (nr_reclaimable + nr_writeback <= (background_thresh +
	// dirty_thresh) / 2) break;" and the bdi's own threshold.
	if g.wbDirty <= g.wbThresh || g.dirty <= (g.bgThresh+g.thresh)/2 {
		k.wbs[w].dirtyExceeded = false
		t.nrDirtiedPause = ratelimitPages2633
		t.written2633 = 0
		return true
	}
	k.wbs[w].dirtyExceeded = true
	t.nrDirtiedPause = dirtyExceededRatelimit2633
	d := &k.disks[k.inodes[t.lastIno].disk]
	if k.wbs[w].reclaimable > g.wbThresh && t.written2633 < writeChunk2633 {
		n, full := k.writebackInode(t.lastIno, writeChunk2633-t.written2633)
		t.written2633 += n
		if full {
			// get_request_wait(): a completion frees a request.
			t.bdpAgain = true
			k.sleep(t, max(d.ring[d.head].done, t.clock), StopDirtyPause)
			return false
		}
	}
	if t.written2633 >= writeChunk2633 {
		t.written2633 = 0 // "We've done our duty"
		return true
	}
	wait := t.clock + congestionWait2633
	if d.congested() {
		wait = min(wait, max(d.ring[d.head].done, t.clock))
	}
	t.Pauses++
	t.bdpAgain = true
	k.sleep(t, wait, StopDirtyPause)
	return false
}
