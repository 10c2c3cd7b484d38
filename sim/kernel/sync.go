package kernel

// fdatasync(2) (fs/sync.c, do_fsync with datasync: vfs_fsync_range, which
// for ext4 is ext4_sync_file): file_write_and_wait_range() writes every
// dirty page of the file (mm/filemap.c, filemap_fdatawrite_range with
// WB_SYNC_ALL) and waits for them and for any already under writeback
// (filemap_fdatawait_range); then the filesystem commits its journal,
// which an appending write needs (the file's size changed). The task
// submits the data itself, in requests of at most the disk's largest,
// sleeping on a full queue until a request completes; the journal commit
// is one write of Config.JournalCommitPages, submitted once the data is on
// disk, as ext4's ordered mode does. The disk serves requests in order, so
// both wait behind whatever others queued first.
//
// Not modelled: the journal is not shared (jbd2 batches the fsyncs of a
// transaction into one commit, and a commit carries every metadata change
// of the transaction and, in ordered mode, waits for the data of the other
// inodes it lists: another writer's block allocations); no cache flush
// (REQ_PREFLUSH, FUA) costs anything, the disk having no cache; the block
// layer gives sync writes no priority over background writeback (no wbt,
// no I/O scheduler), which in the kernel would shorten these waits.

// fsyncState is an fdatasync in progress.
type fsyncState struct {
	ino    int32 // nilIdx when none
	phase  uint8
	target int64 // the inode's completed count to wait for
}

// Phases of an fdatasync.
const (
	syncWriteData = iota
	syncWaitData
	syncJournal
	syncWaitJournal
)

// Fdatasync is fdatasync(2) of ino by t. It returns false if t was frozen
// at the call, which then did not start (call it again); otherwise the
// call is made, and t runs its workload again only once it has completed
// (it may sleep first, counted as StopSync).
func (k *Kernel) Fdatasync(t *Task, ino int32) bool {
	if k.stopFrozen(t) {
		return false
	}
	t.sync = fsyncState{ino: ino, phase: syncWriteData}
	k.fdatasyncResume(t)
	return true
}

// fdatasyncResume carries t's fdatasync on until it must wait, and reports
// whether it has completed.
func (k *Kernel) fdatasyncResume(t *Task) bool {
	s := &t.sync
	for {
		in := &k.inodes[s.ino]
		d := &k.disks[in.disk]
		switch s.phase {
		case syncWriteData:
			if _, full := k.writebackInode(s.ino, in.dirty.pages); full {
				k.sleep(t, max(d.ring[d.head].done, t.clock), StopSync) // a free request
				return false
			}
			s.target, s.phase = in.submitted, syncWaitData
		case syncWaitData:
			if in.completed < s.target {
				t.waitIno, t.waitSeq = s.ino, s.target
				in.waiters++
				k.block(t, StopSync)
				return false
			}
			s.phase = syncJournal
		case syncJournal:
			if k.cfg.JournalCommitPages <= 0 {
				s.ino = nilIdx
				return true
			}
			if d.full() {
				k.sleep(t, max(d.ring[d.head].done, t.clock), StopSync)
				return false
			}
			k.submit(in.disk, t.clock, request{pages: k.cfg.JournalCommitPages, ino: nilIdx, task: t.id})
			s.phase = syncWaitJournal
			k.block(t, StopSync)
			return false
		case syncWaitJournal:
			s.ino = nilIdx
			return true
		}
	}
}
