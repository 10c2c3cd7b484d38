package main

import (
	"math"
	"slices"

	"github.com/memcgd/memcgd/experiments/internal/lab"
)

// The categories of a sampled kernel stack: what the task was doing or
// waiting for. Each is recognised by a kernel function on the stack
// (categorize); the first that matches, in the order of categoryRules,
// wins.
const (
	catRunning  = "running or waiting for a CPU"
	catFrozen   = "frozen"
	catJHandles = "jbd2: waiting for handles to stop"
	catJOrdered = "jbd2: writing and waiting on ordered data"
	catJCommit  = "jbd2: writing the log"
	catJIdle    = "jbd2: idle"
	catJWait    = "waiting for a journal commit"
	catBalance  = "balance_dirty_pages"
	catWBT      = "block: writeback throttling (wbt)"
	catTag      = "block: waiting for a request tag"
	catFlush    = "block: cache flush"
	catAssoc    = "the inode's metadata buffers (fsync_buffers_list)"
	catInode    = "writing the inode (ext4_write_inode)"
	catBuffer   = "other metadata buffer I/O"
	catData     = "waiting for its data's writeback"
	catLock     = "a lock"
	catSleep    = "sleeping"
	catOther    = "other"
)

// syncCategories are the categories reported for the log's thread.
var syncCategories = []string{catRunning, catJWait, catWBT, catTag, catFlush, catAssoc, catInode, catBuffer, catData, catBalance, catLock, catOther}

// journalCategories are the categories reported for the jbd2 thread.
var journalCategories = []string{catRunning, catJHandles, catJOrdered, catJCommit, catWBT, catTag, catJIdle, catOther}

// categoryRules are the kernel functions that mark each category, in the
// order they are tried. The journal's phases come first, so that the jbd2
// thread's waits are named by the phase it waits in; a stack with none of
// them falls through to the block layer's waits and then to what its
// caller waits for.
var categoryRules = []struct {
	cat   string
	funcs []string
}{
	// kernel/freezer.c __refrigerator (v1 freezer); kernel/signal.c
	// do_freezer_trap (cgroup v2 freezer).
	{catFrozen, []string{"__refrigerator", "do_freezer_trap"}},
	// fs/jbd2/commit.c jbd2_journal_commit_transaction: it waits for
	// t_updates to fall to 0 (jbd2_journal_wait_updates), then writes
	// the inodes' ordered data (journal_submit_data_buffers) and waits
	// for it (journal_finish_inode_data_buffers), then writes the log.
	{catJHandles, []string{"jbd2_journal_wait_updates"}},
	{catJOrdered, []string{"journal_submit_data_buffers", "journal_finish_inode_data_buffers",
		"jbd2_journal_submit_inode_data_buffers", "jbd2_journal_finish_inode_data_buffers"}},
	{catJCommit, []string{"jbd2_journal_commit_transaction"}},
	{catJIdle, []string{"kjournald2"}},
	// fs/jbd2/journal.c jbd2_log_wait_commit: an fsync waiting for the
	// commit of its transaction.
	{catJWait, []string{"jbd2_log_wait_commit"}},
	{catBalance, []string{"balance_dirty_pages"}},
	// block/blk-rq-qos.c rq_qos_wait, block/blk-wbt.c wbt_wait.
	{catWBT, []string{"rq_qos_wait", "wbt_wait"}},
	{catTag, []string{"blk_mq_get_tag"}},
	{catFlush, []string{"blkdev_issue_flush"}},
	// Without a journal, fdatasync writes and waits for the buffers
	// associated with the inode's mapping (the block bitmap and group
	// descriptor its allocation dirtied: fs/buffer.c fsync_buffers_list,
	// via generic_buffers_fsync_noflush) and then the inode's block
	// (fs/ext4/fsync.c ext4_fsync_nojournal, ext4_write_inode).
	{catAssoc, []string{"fsync_buffers_list", "sync_mapping_buffers"}},
	{catInode, []string{"ext4_write_inode"}},
	{catBuffer, []string{"__wait_on_buffer", "__sync_dirty_buffer", "sync_dirty_buffer"}},
	{catData, []string{"folio_wait_writeback", "__filemap_fdatawait_range", "folio_wait_bit_common", "filemap_fdatawait_range"}},
	{catLock, []string{"mutex_lock", "__mutex_lock", "rwsem_down_write_slowpath", "rwsem_down_read_slowpath", "down_write", "down_read"}},
	// A Go program's sleep parks its thread on a futex.
	{catSleep, []string{"do_nanosleep", "hrtimer_nanosleep", "futex_wait", "futex_do_wait"}},
}

// categorize names what a sample of state and frames shows.
func categorize(state byte, frames []string) string {
	if state == 'R' {
		return catRunning
	}
	for _, r := range categoryRules {
		if slices.ContainsFunc(frames, func(f string) bool { return slices.Contains(r.funcs, f) }) {
			return r.cat
		}
	}
	return catOther
}

// categoryShare is the share of s's samples in category cat, in percent;
// NaN without samples (printed n/a).
func categoryShare(s lab.Stacks, cat string) float64 {
	if s.N == 0 {
		return math.NaN()
	}
	n := 0
	for k, c := range s.ByStack {
		state, frames := lab.SplitStackKey(k)
		if categorize(state, frames) == cat {
			n += c
		}
	}
	return float64(n) / float64(s.N) * 100
}
