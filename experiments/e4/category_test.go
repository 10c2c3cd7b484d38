package main

import (
	"math"
	"strings"
	"testing"

	"github.com/memcgd/memcgd/experiments/internal/lab"
)

// Stacks as /proc/PID/task/TID/stack showed them on 6.18 (no journal) and
// 6.1 (jbd2), innermost first.
func TestCategorizeNamesTheWait(t *testing.T) {
	for _, tc := range []struct {
		state byte
		stack string
		want  string
	}{
		{'D', "rq_qos_wait < wbt_wait < __rq_qos_throttle < blk_mq_submit_bio < __submit_bio < submit_bio_noacct_nocheck < __sync_dirty_buffer < ext4_write_inode", catWBT},
		{'D', "__sync_dirty_buffer < ext4_write_inode < ext4_fsync_nojournal.constprop.0 < ext4_sync_file < do_fsync", catInode},
		{'D', "fsync_buffers_list < generic_buffers_fsync_noflush < ext4_fsync_nojournal.constprop.0 < ext4_sync_file", catAssoc},
		{'D', "folio_wait_bit < folio_wait_writeback < __filemap_fdatawait_range < file_write_and_wait_range < generic_buffers_fsync_noflush", catData},
		{'D', "submit_bio_wait < blkdev_issue_flush < ext4_sync_file < do_fsync < __x64_sys_fdatasync", catFlush},
		{'R', "submit_bio_wait < blkdev_issue_flush < ext4_sync_file", catRunning}, // runnable: not waiting there any more
		{'D', "jbd2_log_wait_commit < jbd2_complete_transaction < ext4_fdatasync_journal < ext4_sync_file", catJWait},
		{'D', "jbd2_journal_wait_updates < jbd2_journal_commit_transaction < kjournald2 < kthread", catJHandles},
		{'D', "folio_wait_bit_common < filemap_fdatawait_range_keep_errors < jbd2_journal_finish_inode_data_buffers < ext4_journal_finish_inode_data_buffers < journal_finish_inode_data_buffers < jbd2_journal_commit_transaction < kjournald2", catJOrdered},
		{'D', "__wait_on_buffer < jbd2_journal_commit_transaction < kjournald2 < kthread", catJCommit},
		{'S', "kjournald2 < kthread < ret_from_fork", catJIdle},
		{'D', "__refrigerator < get_signal < arch_do_signal_or_restart", catFrozen},
		{'D', "balance_dirty_pages < balance_dirty_pages_ratelimited_flags < generic_perform_write", catBalance},
		{'S', "futex_do_wait < __futex_wait < futex_wait < do_futex", catSleep},
		{'S', "ep_poll < do_epoll_wait", catOther},
		{'S', "", catOther},
	} {
		var frames []string
		if tc.stack != "" {
			frames = strings.Split(tc.stack, " < ")
		}
		if got := categorize(tc.state, frames); got != tc.want {
			t.Errorf("categorize(%c, %s) = %q, want %q", tc.state, tc.stack, got, tc.want)
		}
	}
}

func TestCategoryShareCountsTheSamplesOfACategory(t *testing.T) {
	s := lab.Stacks{N: 8, ByStack: map[string]int{
		lab.StackKey('D', []string{"submit_bio_wait", "blkdev_issue_flush"}): 2,
		lab.StackKey('D', []string{"fsync_buffers_list"}):                    5,
		lab.StackKey('R', []string{"blkdev_issue_flush"}):                    1,
	}}
	if got := categoryShare(s, catFlush); got != 25 {
		t.Errorf("share of %s = %v, want 25 (2 of 8)", catFlush, got)
	}
	if got := categoryShare(lab.Stacks{}, catFlush); !math.IsNaN(got) {
		t.Errorf("share without samples = %v, want NaN", got)
	}
}
