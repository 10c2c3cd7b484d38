package kernel

// Seed 000: Li RongQing, "fs/writeback: do memory cgroup related writeback
// firstly" (2018, not merged). In wakeup_flusher_threads(WB_REASON_VMSCAN)
// (fs/fs-writeback.c) the patch starts writeback of the reclaiming
// cgroup's wb and returns, and falls back to waking every flusher only when
// that cgroup has at most MIN_WB_DIRTY_PAGES dirty.
//
// The model applies the patch's intent on both hierarchies: the reclaiming
// cgroup's own inodes are written (on v1, where the patch as posted finds
// only the bdi's root wb, this is what a v1 port would need). The posted
// patch's "pdirty += MIN_WB_DIRTY_PAGES" for the root wb is not modelled.

// MinWbDirtyPages is the patch's MIN_WB_DIRTY_PAGES.
const MinWbDirtyPages = 64

// Seed000 is the memcg-first writeback option.
type Seed000 struct {
	// MinDirtyPages is the fallback threshold (MinWbDirtyPages).
	MinDirtyPages int64
}

// flushMemcgFirst starts write-out of m's own dirty inodes and reports
// whether that replaces the full flush.
func (o *Seed000) flushMemcgFirst(k *Kernel, m int32) bool {
	if k.memcgs[m].hstat[msFileDirty] <= o.MinDirtyPages {
		return false
	}
	k.WriteoutMemcg(m, WBReasonVmscan, false)
	k.node.memcgFirst++
	return true
}
