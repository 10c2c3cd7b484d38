package kernel

import "testing"

// wal appends one page and fdatasyncs it, ops times, recording each op's
// latency.
type wal struct {
	ino   int32
	ops   int
	off   int64
	phase int
	start Time
	lat   []Time
}

func (w *wal) Step(k *Kernel, t *Task) bool {
	switch w.phase {
	case 0:
		if len(w.lat) >= w.ops {
			return true
		}
		w.start = t.Now()
		if k.Write(t, w.ino, w.off, 1, 1, 1) == 0 {
			return false
		}
		w.off++
		w.phase = 1
		fallthrough
	case 1:
		if !k.Fdatasync(t, w.ino) {
			return false
		}
		w.phase = 2
		return false
	default:
		w.lat = append(w.lat, t.Now()-w.start)
		w.phase = 0
		return false
	}
}

// fs/sync.c, mm/filemap.c file_write_and_wait_range(): on an idle disk an
// fdatasync of one page takes the page's transfer and then the journal
// commit's, leaves the file clean, and counts as StopSync.
func TestFdatasyncWritesAndWaits(t *testing.T) {
	k := testKernel(t, 2, Options{})
	k.cfg.JournalCommitPages = 3
	m := k.NewMemcg(0, "/db", -1, -1)
	w := &wal{ino: k.NewInode(0), ops: 10}
	task := k.NewTask("wal", m, w, 0)
	k.Run(Second)
	if len(w.lat) != w.ops {
		t.Fatalf("%d ops done, want %d", len(w.lat), w.ops)
	}
	xfer := func(pages int64) Time { return Time(pages * PageSize * int64(Second) / (200 << 20)) }
	want := xfer(1) + xfer(3) + 2*k.cfg.WriteCostPerPage // the copy, rounded into the steps
	for i, l := range w.lat {
		if l < xfer(1)+xfer(3) || l > want {
			t.Errorf("op %d took %v, want the two transfers, %v", i, l, xfer(1)+xfer(3))
		}
	}
	if s := k.Stat(m); s.Dirty != 0 || s.Writeback != 0 {
		t.Errorf("after the syncs: %d dirty, %d writeback bytes", s.Dirty, s.Writeback)
	}
	// The data goes to the disk at the step's start, before the copy's
	// CPU time: the task waits that much less.
	if least := Time(w.ops) * (xfer(1) + xfer(3) - k.cfg.WriteCostPerPage); task.Stopped[StopSync] < least {
		t.Errorf("stopped in fdatasync %v, want at least %v", task.Stopped[StopSync], least)
	}
}

// The disk serves requests in order: an fdatasync queued behind a full
// queue of another writer's writeback waits for it to drain, twice (the
// data, then the journal commit submitted after it).
func TestFdatasyncWaitsBehindTheQueue(t *testing.T) {
	k := testKernel(t, 2, Options{})
	k.cfg.JournalCommitPages = 1
	noisy := k.NewMemcg(0, "/noisy", -1, -1)
	k.NewTask("dd", noisy, &seqWriter{ino: int64(k.NewInode(0)), pages: 4 << 18, block: 256}, 0)
	m := k.NewMemcg(0, "/db", -1, -1)
	w := &wal{ino: k.NewInode(0), ops: 20}
	k.NewTask("wal", m, w, 2*Second)
	k.Run(60 * Second)
	d := &k.disks[0]
	queue := Time(int64(d.cfg.NrRequests) * d.cfg.MaxRequestPages * PageSize * int64(Second) / d.cfg.WriteBandwidth)
	var worst Time
	for _, l := range w.lat {
		worst = max(worst, l)
	}
	if len(w.lat) != w.ops || worst < queue {
		t.Errorf("%d ops, the slowest %v, want some waiting the full queue's %v", len(w.lat), worst, queue)
	}
}

// Nothing dirty and no journal: fdatasync returns at once, without
// sleeping.
func TestFdatasyncOfACleanFile(t *testing.T) {
	k := testKernel(t, 2, Options{})
	task := k.NewTask("idle", 0, &spinner{until: 0}, 0)
	task.clock = 0
	if !k.Fdatasync(task, k.NewInode(0)) || task.sleeping || task.sync.ino != nilIdx {
		t.Errorf("sleeping %v, in progress %v", task.sleeping, task.sync.ino != nilIdx)
	}
}

// dirtyOnce writes pages into its inode and exits.
type dirtyOnce struct {
	ino   int32
	pages int64
}

func (d *dirtyOnce) Step(k *Kernel, t *Task) bool {
	k.Write(t, d.ino, 0, d.pages, d.pages, 1)
	return true
}

// sync_file_range(SYNC_FILE_RANGE_WRITE) writes in the caller's context
// (mm/filemap.c, __filemap_fdatawrite_range) and wakes no flusher, so
// memcgd's write-out of one cgroup leaves another's dirty pages alone;
// a flusher run (wb_do_writeback() in fs/fs-writeback.c) goes on to
// background writeback once its queue is done, and writes them too while
// the wb has completed too little writeback for a share of the threshold.
func TestACallersWriteOutWakesNoFlusher(t *testing.T) {
	for _, tt := range []struct {
		name      string
		writeOut  func(k *Kernel, m int32)
		othersAre uint64 // dirty pages of the other cgroup after it
	}{
		{"sync_file_range in the caller's context", func(k *Kernel, m int32) { k.SyncMemcg(m) }, 10},
		{"a flusher work item", func(k *Kernel, m int32) { k.WriteoutMemcg(m, WBReasonTargeted, false) }, 0},
	} {
		k := testKernel(t, 1, Options{})
		a, b := k.NewMemcg(0, "/a", -1, -1), k.NewMemcg(0, "/b", -1, -1)
		for _, m := range []int32{a, b} {
			k.NewTask("w", m, &dirtyOnce{ino: k.NewInode(0), pages: 10}, 0)
		}
		k.Advance(10 * Millisecond)
		tt.writeOut(k, a)
		k.Advance(Second) // before the flushers' delayed wake-up (5 s)
		if s := k.Stat(a); s.Dirty != 0 {
			t.Errorf("%s: the written cgroup holds %d dirty bytes, want 0", tt.name, s.Dirty)
		}
		if s := k.Stat(b); s.Dirty != tt.othersAre*PageSize {
			t.Errorf("%s: the other cgroup holds %d dirty pages, want %d", tt.name, s.Dirty/PageSize, tt.othersAre)
		}
	}
}
