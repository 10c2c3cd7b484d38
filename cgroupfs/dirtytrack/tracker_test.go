package dirtytrack_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/dirtytrack"
	"github.com/memcgd/memcgd/internal/stats"
	"golang.org/x/sys/unix"
)

const (
	kib = 1 << 10
	mib = 1 << 20
)

// load loads the tracker, or skips (fails with CI=true: the kernels the
// project tests on must run it).
func load(t *testing.T) *dirtytrack.Tracker {
	t.Helper()
	return loadOptions(t, dirtytrack.Options{})
}

// loadOptions is load with opts.
func loadOptions(t *testing.T, opts dirtytrack.Options) *dirtytrack.Tracker {
	t.Helper()
	tr, err := dirtytrack.Load(opts)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("load: %v", err)
		}
		t.Skipf("load: %v", err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// diskDir is cgrouptest.DiskDir.
func diskDir(t *testing.T) string { return cgrouptest.DiskDir(t) }

// stat reads a key of the cgroup's memory.stat.
func stat(t *testing.T, c *cgrouptest.Cgroup, key string) uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.Dir, "memory.stat"))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("memory.stat %s %q: %v", key, v, err)
			}
			return n
		}
	}
	t.Fatalf("memory.stat of %s has no %s", c.Path, key)
	return 0
}

// dirtyWB is the cgroup's dirty plus writeback page cache, its own and its
// descendants' (v1 total_dirty + total_writeback, v2 file_dirty +
// file_writeback).
func dirtyWB(t *testing.T, l cgroupfs.Layout, c *cgrouptest.Cgroup) uint64 {
	t.Helper()
	if l.Memory.Version == cgroupfs.V1 {
		return stat(t, c, "total_dirty") + stat(t, c, "total_writeback")
	}
	return stat(t, c, "file_dirty") + stat(t, c, "file_writeback")
}

// awaitDirtyWB reads c's dirty+writeback until ok accepts it, for up to
// 3 s, and returns the last reading: memory.stat lags the page counters
// (see agree).
func awaitDirtyWB(t *testing.T, l cgroupfs.Layout, c *cgrouptest.Cgroup, ok func(uint64) bool) uint64 {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if v := dirtyWB(t, l, c); ok(v) || time.Now().After(deadline) {
			return v
		}
	}
}

// agree runs write, which dirties fresh pages charged to c, and returns the
// tracker's count for id over it and the growth of c's memory.stat
// dirty+writeback, once they agree within slack or after 3 tries.
//
// Two things make memory.stat disagree for a while without a fault of the
// tracker, and are waited out or retried: memory.stat lags the page
// counters, since a reader skips the flush of the per-CPU stats while
// another flush runs (6.1: mm/memcontrol.c, __mem_cgroup_flush_stats,
// spin_trylock; the periodic flush runs every 2 s); and on a shared machine
// another process's sync(2) or flush cleans pages during the write, which
// lowers the growth.
func agree(t *testing.T, l cgroupfs.Layout, tr *dirtytrack.Tracker, c *cgrouptest.Cgroup, id uint64, write func(try int)) (got uint64, grew int64) {
	t.Helper()
	for try := range 3 {
		before := dirtyWB(t, l, c)
		counted, err := tr.Dirtied(id)
		if err != nil {
			t.Fatal(err)
		}
		write(try)
		now, err := tr.Dirtied(id)
		if err != nil {
			t.Fatal(err)
		}
		got = now - counted
		grew = int64(awaitDirtyWB(t, l, c, func(v uint64) bool { return agrees(got, int64(v)-int64(before)) })) - int64(before)
		if agrees(got, grew) {
			break
		}
		t.Logf("try %d: tracker counted %d bytes, memory.stat dirty+writeback grew %d: retrying", try+1, got, grew)
	}
	return got, grew
}

func agrees(got uint64, grew int64) bool { return grew >= 0 && within(got, uint64(grew), slack(got)) }

func cgroupID(t *testing.T, c *cgrouptest.Cgroup) uint64 {
	t.Helper()
	id, err := dirtytrack.CgroupID(c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// slack is how far the tracker's count may be from memory.stat's growth:
// one large folio (2 MiB) plus the per-CPU stat batches memory.stat may
// not have flushed yet (v2 rstat, 64 pages a CPU), plus 1 %.
func slack(n uint64) uint64 { return 2*mib + 64*4*kib*uint64(max(2, numCPU())) + n/100 }

func numCPU() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 1
	}
	return set.Count()
}

func within(got, want, tol uint64) bool {
	if got > want {
		return got-want <= tol
	}
	return want-got <= tol
}

func TestDirtiedAgreesWithMemoryStat(t *testing.T) {
	l := cgrouptest.Layout(t)
	tr := load(t)
	dir := diskDir(t)
	c := cgrouptest.New(t, l, 512*mib)
	id := cgroupID(t, c)
	if err := tr.Watch(id, dirtytrack.Never); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{16 * mib, 4 * mib, 24 * mib} {
		got, grew := agree(t, l, tr, c, id, func(try int) {
			cgrouptest.DirtyFile(t, c, filepath.Join(dir, fmt.Sprintf("f%d-%d", size, try)), size)
		})
		t.Logf("wrote %d MiB: tracker counted %d bytes, memory.stat dirty+writeback grew %d", size/mib, got, grew)
		if !agrees(got, grew) {
			t.Errorf("wrote %d bytes: tracker counted %d, memory.stat dirty+writeback grew %d: differ by more than %d",
				size, got, grew, slack(got))
		}
		if got < uint64(size) {
			t.Errorf("wrote %d new bytes: tracker counted only %d", size, got)
		}
	}
}

func TestHierarchicalCounting(t *testing.T) {
	l := cgrouptest.Layout(t)
	tr := load(t)
	dir := diskDir(t)
	parent := cgrouptest.New(t, l, 512*mib)
	child := parent.Child(t, "child")
	sibling := parent.Child(t, "sibling")
	pid, cid := cgroupID(t, parent), cgroupID(t, child)
	// Only the parent is watched: the child's folios count for it.
	if err := tr.Watch(pid, 8*mib); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "child")
	got, grew := agree(t, l, tr, parent, pid, func(try int) {
		if try > 0 {
			file = filepath.Join(dir, fmt.Sprintf("child-%d", try))
		}
		cgrouptest.DirtyFile(t, child, file, 16*mib)
		cgrouptest.DirtyFile(t, sibling, filepath.Join(dir, fmt.Sprintf("sibling-%d", try)), 4*mib)
	})
	t.Logf("children wrote 20 MiB: parent counted %d, parent's memory.stat dirty+writeback grew %d", got, grew)
	if !agrees(got, grew) || got < 20*mib {
		t.Errorf("children wrote 20 MiB: parent counted %d, its memory.stat dirty+writeback grew %d (slack %d)", got, grew, slack(got))
	}
	if _, err := tr.Dirtied(cid); !errors.Is(err, dirtytrack.ErrNotWatched) {
		t.Errorf("Dirtied of the unwatched child: err %v, want ErrNotWatched", err)
	}
	ev := awaitEvent(t, tr, dirtytrack.Wake, pid, time.Second)
	if ev.Dirtied <= 8*mib {
		t.Errorf("wake-up at %d dirtied bytes, want above the threshold %d", ev.Dirtied, 8*mib)
	}
	// The file was recorded for the watched parent too.
	inodes, err := tr.Inodes(pid)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(file, &st); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(inodes, func(i dirtytrack.Inode) bool { return i.Dev == st.Dev && i.Ino == st.Ino }) {
		t.Errorf("Inodes(parent) = %v: missing the child's file %s (dev %d ino %d)", inodes, file, st.Dev, st.Ino)
	}
	if err := tr.Unwatch(pid); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Dirtied(pid); !errors.Is(err, dirtytrack.ErrNotWatched) {
		t.Errorf("Dirtied after Unwatch: err %v, want ErrNotWatched", err)
	}
}

// awaitEvent waits up to timeout for an event of kind for the cgroup id,
// skipping others.
func awaitEvent(t *testing.T, tr *dirtytrack.Tracker, kind dirtytrack.Kind, id uint64, timeout time.Duration) dirtytrack.Event {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-tr.Events():
			if !ok {
				t.Fatal("events closed")
			}
			if ev.Kind == kind && ev.ID == id {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %s event for cgroup %d within %v", kind, id, timeout)
		}
	}
}

// wakeBound is the longest a wake-up may take, at p99, from the folio that
// passed the threshold to its receipt, on a loaded 2-core machine. The test
// VM emulates its CPUs (qemu TCG, no KVM): the writer and the receiver
// share slow virtual CPUs, and its latencies say nothing about real ones.
func wakeBound() time.Duration {
	if os.Getenv("MEMCGD_VM") == "1" {
		return time.Second
	}
	return 50 * time.Millisecond
}

func TestWakeUpLatency(t *testing.T) {
	l := cgrouptest.Layout(t)
	tr := load(t)
	dir := diskDir(t)
	c := cgrouptest.New(t, l, 512*mib)
	id := cgroupID(t, c)
	const step, total = 1 * mib, 48 * mib
	if err := tr.Watch(id, step); err != nil {
		t.Fatal(err)
	}
	data, stamps := filepath.Join(dir, "data"), filepath.Join(dir, "stamps")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	writer := c.Start(t, self, "-test.run=^TestHelperWriter$", "--", data, strconv.Itoa(total/(4*kib)), stamps)
	done := make(chan error, 1)
	go func() { done <- writer.Wait() }()

	var events []dirtytrack.Event
	var receipt []time.Duration
	var werr error
	running := true
	for running || len(events) == 0 {
		select {
		case ev := <-tr.Events():
			now := dirtytrack.MonotonicNow()
			if ev.Kind != dirtytrack.Wake || ev.ID != id {
				continue
			}
			events = append(events, ev)
			receipt = append(receipt, now)
			// Re-arm one step above where it fired.
			if err := tr.Watch(id, ev.Dirtied+step); err != nil {
				t.Fatal(err)
			}
		case werr = <-done:
			running = false
			done = nil
		case <-time.After(10 * time.Second):
			t.Fatalf("no wake-up for 10 s (%d so far)", len(events))
		}
	}
	if werr != nil {
		t.Fatalf("writer: %v (stderr %q)", werr, writer.Stderr)
	}
	// Wake-ups still in flight when the writer exited.
	for {
		select {
		case ev := <-tr.Events():
			if ev.Kind == dirtytrack.Wake && ev.ID == id {
				events = append(events, ev)
				receipt = append(receipt, dirtytrack.MonotonicNow())
			}
			continue
		case <-time.After(200 * time.Millisecond):
		}
		break
	}
	b, err := os.ReadFile(stamps)
	if err != nil {
		t.Fatal(err)
	}
	writeAt := make([]time.Duration, len(b)/8)
	for i := range writeAt {
		writeAt[i] = time.Duration(binary.LittleEndian.Uint64(b[8*i:]))
	}
	var kernel, fromWrite []time.Duration
	for i, ev := range events {
		kernel = append(kernel, receipt[i]-ev.Time)
		// The write whose folio took the count to ev.Dirtied.
		w := int(ev.Dirtied/(4*kib)) - 1
		if w >= 0 && w < len(writeAt) {
			fromWrite = append(fromWrite, receipt[i]-writeAt[w])
		}
	}
	t.Logf("%d wake-ups over %d MiB of 4 KiB writes; folio dirtied -> receipt: %s", len(events), total/mib, distribution(kernel))
	t.Logf("write() -> receipt: %s", distribution(fromWrite))
	// One wake-up per step re-armed: at least one per 2 steps even when
	// re-arming lags the writer by a whole step.
	if len(events) < total/step/2 {
		t.Errorf("%d wake-ups for %d MiB with a step of %d MiB, want at least %d", len(events), total/mib, step/mib, total/step/2)
	}
	if p := percentile(kernel, 0.99); p > wakeBound() {
		t.Errorf("p99 wake-up latency %v, want at most %v", p, wakeBound())
	}
}

// TestHelperWriter is the writer TestWakeUpLatency runs in its cgroup:
// args FILE BLOCKS STAMPS. It writes BLOCKS 4 KiB blocks to FILE and then
// writes to STAMPS the CLOCK_MONOTONIC time before each write.
func TestHelperWriter(t *testing.T) {
	args := flag.Args()
	if len(args) != 3 {
		t.Skip("helper process for TestWakeUpLatency")
	}
	n, err := strconv.Atoi(args[1])
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(args[0])
	if err != nil {
		t.Fatal(err)
	}
	block := make([]byte, 4*kib)
	stamps := make([]byte, 8*n)
	for i := range n {
		binary.LittleEndian.PutUint64(stamps[8*i:], uint64(dirtytrack.MonotonicNow()))
		if _, err := f.Write(block); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(args[2], stamps, 0o600); err != nil {
		t.Fatal(err)
	}
}

// percentile is the p-th percentile of d (p a fraction), nearest rank.
func percentile(d []time.Duration, p float64) time.Duration {
	return stats.Percentile(slices.Sorted(slices.Values(d)), 100*p)
}

func distribution(d []time.Duration) string {
	if len(d) == 0 {
		return "no samples"
	}
	return fmt.Sprintf("n=%d p50=%v p90=%v p99=%v max=%v", len(d),
		percentile(d, 0.5), percentile(d, 0.9), percentile(d, 0.99), slices.Max(d))
}

func TestClosedFileWriteOut(t *testing.T) {
	l := cgrouptest.Layout(t)
	tr := load(t)
	dir := diskDir(t)
	a := cgrouptest.New(t, l, 512*mib)
	b := cgrouptest.New(t, l, 512*mib)
	aid := cgroupID(t, a)
	fileA := filepath.Join(dir, "a")
	// The writer exits: no task has the file open, so /proc cannot find it.
	// The kernel's flusher may write some of the pages back first: it
	// still writes out what earlier tests dirtied (background writeback,
	// once past the threshold, takes any inode's pages), or the VM's
	// vCPUs stall past dirty_writeback_centisecs. So the filesystem is
	// synced first, and the files dirtied again while the flusher took
	// more than a tenth.
	var dirtyA, dirtyB uint64
	const rounds = 3
	for round := 1; ; round++ {
		syncfs(t, dir)
		cgrouptest.DirtyFile(t, a, fileA, 32*mib)
		cgrouptest.DirtyFile(t, b, filepath.Join(dir, "b"), 16*mib)
		dirtyA, dirtyB = stat(t, a, dirtyKey(l)), stat(t, b, dirtyKey(l))
		if dirtyA >= 30*mib && dirtyB >= 14*mib {
			break
		}
		if round == rounds {
			t.Fatalf("before write-out, in %d rounds: dirty A %d, B %d; want about 32 MiB and 16 MiB", rounds, dirtyA, dirtyB)
		}
		t.Logf("round %d: dirty A %d, B %d before write-out, want about 32 MiB and 16 MiB: the flusher took some; again", round, dirtyA, dirtyB)
	}
	inodes, err := tr.Inodes(aid)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(fileA, &st); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(inodes, func(i dirtytrack.Inode) bool { return i.Dev == st.Dev && i.Ino == st.Ino }) {
		t.Fatalf("Inodes(A) = %v: missing %s (dev %d ino %d)", inodes, fileA, st.Dev, st.Ino)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fds := openFDs(t)
	start := time.Now()
	res, err := tr.WriteOutInodes(ctx, inodes)
	if err != nil {
		t.Fatal(err)
	}
	// No descriptor stays open: one on the mount would keep a tenant's
	// volume from being unmounted.
	if after := openFDs(t); after != fds {
		t.Errorf("open descriptors: %d before the write-out, %d after", fds, after)
	}
	t.Logf("write-out of %d inode(s): %+v in %v", len(inodes), res, time.Since(start))
	if res.Files == 0 {
		t.Fatalf("write-out of %v: no file written out (%+v)", inodes, res)
	}
	// sync_file_range(WRITE) queues the pages: A's dirty pages go to
	// writeback at once; B's stay dirty.
	if d := stat(t, a, dirtyKey(l)); d > dirtyA/10 {
		t.Errorf("A's dirty after write-out: %d, want at most a tenth of %d", d, dirtyA)
	}
	if d := stat(t, b, dirtyKey(l)); d < dirtyB*9/10 {
		t.Errorf("B's dirty after A's write-out: %d, want its %d untouched", d, dirtyB)
	}
}

// syncfs writes back the filesystem of dir and waits for it.
func syncfs(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		t.Fatalf("syncfs %s: %v", dir, err)
	}
}

func dirtyKey(l cgroupfs.Layout) string {
	if l.Memory.Version == cgroupfs.V1 {
		return "dirty"
	}
	return "file_dirty"
}

// handleOf returns the inode of path as OpenInode takes it, from its file
// handle ({u32 ino, u32 gen} on ext4), without opening it.
func handleOf(t *testing.T, path string) dirtytrack.Inode {
	t.Helper()
	h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, path, 0)
	if err != nil {
		t.Fatalf("name_to_handle_at %s: %v", path, err)
	}
	if h.Type() != 1 || h.Size() != 8 {
		t.Skipf("%s: file handle type %#x size %d, want ext4's FILEID_INO32_GEN", path, h.Type(), h.Size())
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return dirtytrack.Inode{Dev: st.Dev, Ino: st.Ino, Generation: binary.LittleEndian.Uint32(h.Bytes()[4:])}
}

func TestOpenInodeRefusesAllButRegularFiles(t *testing.T) {
	cgrouptest.Layout(t) // root
	tr := load(t)
	dir := diskDir(t)
	regular := filepath.Join(dir, "regular")
	if err := os.WriteFile(regular, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	deleted := filepath.Join(dir, "deleted")
	if err := os.WriteFile(deleted, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	deletedIno := handleOf(t, deleted)
	if err := os.Remove(deleted); err != nil {
		t.Fatal(err)
	}
	mk := func(name string, mode uint32, dev int) string {
		p := filepath.Join(dir, name)
		if err := unix.Mknod(p, mode|0o600, dev); err != nil {
			t.Fatalf("mknod %s: %v", p, err)
		}
		return p
	}
	tests := []struct {
		name string
		ino  dirtytrack.Inode
		want error // nil: opens
	}{
		{"regular file", handleOf(t, regular), nil},
		{"character device (as /dev/null)", handleOf(t, mk("null", unix.S_IFCHR, int(unix.Mkdev(1, 3)))), dirtytrack.ErrRefused},
		{"block device (as /dev/loop0)", handleOf(t, mk("loop", unix.S_IFBLK, int(unix.Mkdev(7, 0)))), dirtytrack.ErrRefused},
		{"FIFO", handleOf(t, mk("fifo", unix.S_IFIFO, 0)), dirtytrack.ErrRefused},
		{"directory", handleOf(t, dir), dirtytrack.ErrRefused},
		{"deleted file", deletedIno, unix.ESTALE},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := tr.OpenInode(tt.ino)
			if f != nil {
				f.Close()
			}
			if tt.want == nil && err != nil {
				t.Fatalf("OpenInode: %v, want the file", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("OpenInode: err %v, want %v", err, tt.want)
			}
		})
	}
}

func TestMkdirEvent(t *testing.T) {
	l := cgrouptest.Layout(t)
	tr := load(t)
	if !tr.CgroupEvents() {
		t.Fatal("cgroup mkdir/rmdir programs did not attach")
	}
	parent := cgrouptest.New(t, l, 0)
	created := time.Now()
	child := parent.Child(t, "new")
	id := cgroupID(t, child)
	ev := awaitEvent(t, tr, dirtytrack.Mkdir, id, time.Second)
	t.Logf("mkdir event %+v, received %v after the child was made", ev, time.Since(created))
	if want := cgroupID(t, parent); ev.Parent != want {
		t.Errorf("mkdir event parent %d, want %d", ev.Parent, want)
	}
	if !strings.HasSuffix(ev.Path, "/"+filepath.Base(parent.Dir)+"/new") {
		t.Errorf("mkdir event path %q, want one ending in %s/new", ev.Path, filepath.Base(parent.Dir))
	}
	if ev.Level != strings.Count(string(child.Path), "/") {
		t.Errorf("mkdir event level %d, want %d for %s", ev.Level, strings.Count(string(child.Path), "/"), child.Path)
	}
}

func TestCgroupIDRoundTrip(t *testing.T) {
	l := cgrouptest.Layout(t)
	c := cgrouptest.New(t, l, 0)
	id, err := dirtytrack.CgroupID(c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(c.Dir, &st); err != nil {
		t.Fatal(err)
	}
	if id != st.Ino {
		t.Errorf("CgroupID(%s) = %d, want the directory's inode %d", c.Dir, id, st.Ino)
	}
	dir, err := dirtytrack.CgroupDir(l.Memory.Mount, id)
	if err != nil {
		t.Fatal(err)
	}
	if dir != c.Dir {
		t.Errorf("CgroupDir(%s, %d) = %s, want %s", l.Memory.Mount, id, dir, c.Dir)
	}
}

func TestRmdirEventUnwatches(t *testing.T) {
	l := cgrouptest.Layout(t)
	tr := load(t)
	if !tr.CgroupEvents() {
		t.Fatal("cgroup mkdir/rmdir programs did not attach")
	}
	var id uint64
	// Cleanups run last-registered first: this one runs after cgrouptest
	// has removed the cgroup.
	t.Cleanup(func() {
		awaitEvent(t, tr, dirtytrack.Rmdir, id, 5*time.Second)
		if _, err := tr.Dirtied(id); !errors.Is(err, dirtytrack.ErrNotWatched) {
			t.Errorf("Dirtied of a removed cgroup: err %v, want ErrNotWatched", err)
		}
		if n := tr.Watched(); n != 0 {
			t.Errorf("%d cgroups watched after the only one was removed", n)
		}
	})
	c := cgrouptest.New(t, l, 0)
	id = cgroupID(t, c)
	if err := tr.Watch(id, dirtytrack.Never); err != nil {
		t.Fatal(err)
	}
}

// TestCountsOwnerNotWriter: a folio counts for the cgroup charged for it,
// as memory.stat does, not for the task that dirties it (the program's
// probe-read path, since the writer's memcg differs).
func TestCountsOwnerNotWriter(t *testing.T) {
	l := cgrouptest.Layout(t)
	tr := load(t)
	dir := diskDir(t)
	owner := cgrouptest.New(t, l, 512*mib)
	writer := cgrouptest.New(t, l, 512*mib)
	oid, wid := cgroupID(t, owner), cgroupID(t, writer)
	for _, id := range []uint64{oid, wid} {
		if err := tr.Watch(id, dirtytrack.Never); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "shared")
	cgrouptest.DirtyFile(t, owner, file, 8*mib)
	// Clean the pages; they stay cached and charged to owner.
	cgrouptest.SyncFile(t, file)
	ownerBefore := dirtied(t, tr, oid)
	writerBefore := dirtied(t, tr, wid)
	cgrouptest.DirtyFile(t, writer, file, 8*mib) // overwrites in place
	ownerAfter := dirtied(t, tr, oid)
	writerAfter := dirtied(t, tr, wid)
	t.Logf("writer rewrote 8 MiB of the owner's cached file: owner counted %d, writer %d", ownerAfter-ownerBefore, writerAfter-writerBefore)
	if got := ownerAfter - ownerBefore; !within(got, 8*mib, slack(8*mib)) {
		t.Errorf("owner counted %d bytes for the rewrite of its 8 MiB, want about %d", got, 8*mib)
	}
	if got := writerAfter - writerBefore; got > slack(0) {
		t.Errorf("writer counted %d bytes for rewriting another cgroup's pages, want about 0", got)
	}
}

func dirtied(t *testing.T, tr *dirtytrack.Tracker, id uint64) uint64 {
	t.Helper()
	n, err := tr.Dirtied(id)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// With Handle, events reach the handler, stamped when they were read from
// the ring, and no longer Events.
func TestHandleTakesTheEvents(t *testing.T) {
	l := cgrouptest.Layout(t)
	tr := load(t)
	c := cgrouptest.New(t, l, 256*mib)
	id := cgroupID(t, c)
	got := make(chan dirtytrack.Event, 64)
	tr.Handle(func(ev dirtytrack.Event) {
		select {
		case got <- ev:
		default: // a test that fell behind loses events, not the tracker's reader
		}
	})
	if err := tr.Watch(id, 1*mib); err != nil {
		t.Fatal(err)
	}
	cgrouptest.DirtyFile(t, c, filepath.Join(diskDir(t), "data"), 4*mib)
	deadline := time.After(wakeBound() + time.Second)
	for {
		select {
		case ev := <-got:
			if ev.Kind != dirtytrack.Wake || ev.ID != id {
				continue
			}
			if ev.Dirtied <= 1*mib || ev.Read < ev.Time {
				t.Errorf("wake-up at %d dirtied bytes, sent at %v and read at %v: want above %d, read after sent", ev.Dirtied, ev.Time, ev.Read, 1*mib)
			}
			select {
			case ev := <-tr.Events():
				t.Errorf("Events delivered %+v though a handler takes them", ev)
			default:
			}
			return
		case <-deadline:
			t.Fatal("no wake-up reached the handler")
		}
	}
}

// Recent lists the last distinct files a watched cgroup's subtree dirtied
// since the watch, newest first and at most 16, with the generation their
// file handles carry; a file dirtied before the watch is not among them, a
// streaming file (recorded again every 512 folios) is listed once, and
// Unwatch empties the list.
func TestRecentListsTheLastFilesDirtied(t *testing.T) {
	l := cgrouptest.Layout(t)
	tr := load(t)
	dir := diskDir(t)
	parent := cgrouptest.New(t, l, 0)
	child := parent.Child(t, "c")
	id := cgroupID(t, parent)
	before := filepath.Join(dir, "before")
	cgrouptest.DirtyFile(t, child, before, 64*kib)
	if err := tr.Watch(id, dirtytrack.Never); err != nil {
		t.Fatal(err)
	}
	// A streaming file first, then more files than the ring holds.
	stream := filepath.Join(dir, "stream")
	cgrouptest.DirtyFile(t, child, stream, 8*mib)
	const files = 20
	var names []string
	for i := range files {
		p := filepath.Join(dir, fmt.Sprintf("f%02d", i))
		cgrouptest.DirtyFile(t, child, p, 16*kib)
		names = append(names, p)
	}
	got, err := tr.Recent(id)
	if err != nil {
		t.Fatal(err)
	}
	var want []dirtytrack.Inode
	for i := files - 1; i >= files-16; i-- {
		w := handleOf(t, names[i])
		w.Cgroup = id
		want = append(want, w)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Recent after %d files:\n got  %v\n want %v (the last 16, newest first)", files, got, want)
	}

	// Fewer than the ring holds: the stream and the files, nothing from
	// before the watch.
	other := cgrouptest.New(t, l, 0)
	oid := cgroupID(t, other)
	cgrouptest.DirtyFile(t, other, filepath.Join(dir, "other-before"), 64*kib)
	if err := tr.Watch(oid, dirtytrack.Never); err != nil {
		t.Fatal(err)
	}
	cgrouptest.DirtyFile(t, other, stream+"2", 8*mib)
	cgrouptest.DirtyFile(t, other, names[0]+"-2", 16*kib)
	got, err = tr.Recent(oid)
	if err != nil {
		t.Fatal(err)
	}
	want = nil
	for _, p := range []string{names[0] + "-2", stream + "2"} {
		w := handleOf(t, p)
		w.Cgroup = oid
		want = append(want, w)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Recent of a cgroup that dirtied a streaming file and a small one after its watch:\n got  %v\n want %v", got, want)
	}

	if err := tr.Unwatch(id); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Recent(id); !errors.Is(err, dirtytrack.ErrNotWatched) {
		t.Errorf("Recent after Unwatch: %v, want ErrNotWatched", err)
	}
	if err := tr.Watch(id, dirtytrack.Never); err != nil {
		t.Fatal(err)
	}
	if got, err := tr.Recent(id); err != nil || len(got) != 0 {
		t.Errorf("Recent after Unwatch and Watch, before any write: %v, %v; want none", got, err)
	}
}

// A file deleted and created again often gets the same inode number with a
// new generation: Recent lists the new file's generation, so that its
// handle opens the new file, not ESTALE for the old one. (Both the ring
// and the per-memcg record compared only the inode number, and the
// unpaced writer test's second round, which writes its file again, went
// unwritten until the once-a-second full scan: 3 % of stock.)
func TestRecentFollowsAReusedInodeNumber(t *testing.T) {
	l := cgrouptest.Layout(t)
	tr := load(t)
	dir := diskDir(t)
	c := cgrouptest.New(t, l, 0)
	id := cgroupID(t, c)
	if err := tr.Watch(id, dirtytrack.Never); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "again")
	const tries = 20
	for try := range tries {
		cgrouptest.DirtyFile(t, c, file, 8*mib)
		before := handleOf(t, file)
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
		cgrouptest.DirtyFile(t, c, file, 8*mib)
		after := handleOf(t, file)
		if after.Ino != before.Ino || after.Generation == before.Generation {
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
			continue // not reused this time
		}
		t.Logf("try %d: inode %d reused, generation %d -> %d", try+1, after.Ino, before.Generation, after.Generation)
		got, err := tr.Recent(id)
		if err != nil {
			t.Fatal(err)
		}
		after.Cgroup = id
		if len(got) == 0 || got[0] != after {
			t.Fatalf("Recent = %v, want the new file %v first", got, after)
		}
		f, err := tr.OpenInode(got[0])
		if err != nil {
			t.Fatalf("OpenInode(%v): %v, want the new file", got[0], err)
		}
		f.Close()
		return
	}
	t.Fatalf("no inode number reused in %d deletions and creations of %s: the case is not exercised", tries, file)
}

// Dirtiers names the threads of a watched cgroup's own tasks that dirtied
// its pages, and an armed report (ArmDirtier) names the first new one
// within a wake-up's time: one report per arming. A writer in a child
// cgroup is the child's, not its parent's.
func TestDirtiersNamesTheWritingThreads(t *testing.T) {
	l := cgrouptest.Layout(t)
	tr := load(t)
	dir := diskDir(t)
	// Tasks only in leaves, as cgroup v2 requires.
	parent := cgrouptest.New(t, l, 0)
	w := parent.Child(t, "w")
	other := parent.Child(t, "other")
	id, pid := cgroupID(t, w), cgroupID(t, parent)
	for _, id := range []uint64{id, pid} {
		if err := tr.Watch(id, dirtytrack.Never); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := tr.Dirtiers(id); err != nil || len(got) != 0 {
		t.Fatalf("Dirtiers before any write: %v, %v; want none", got, err)
	}
	if err := tr.ArmDirtier(id); err != nil {
		t.Fatal(err)
	}
	first := startDD(t, w, filepath.Join(dir, "first"))
	ev := awaitEvent(t, tr, dirtytrack.NewDirtier, id, wakeBound()+time.Second)
	if ev.TID != first {
		t.Errorf("the armed report named thread %d, want the writer's %d", ev.TID, first)
	}
	// Not armed again: a second writer is listed but not reported.
	second := startDD(t, w, filepath.Join(dir, "second"))
	cgrouptest.DirtyFile(t, other, filepath.Join(dir, "other"), 4*mib)
	awaitDirtier(t, tr, id, second)
	select {
	case ev := <-tr.Events():
		if ev.Kind == dirtytrack.NewDirtier {
			t.Errorf("a second report (%+v) without arming again", ev)
		}
	case <-time.After(wakeBound()):
	}
	got, err := tr.Dirtiers(id)
	if err != nil {
		t.Fatal(err)
	}
	var tids []int
	for _, d := range got {
		tids = append(tids, d.TID)
		if d.Age > 5*time.Second {
			t.Errorf("thread %d last dirtied %v ago, while it writes", d.TID, d.Age)
		}
	}
	slices.Sort(tids)
	if want := []int{min(first, second), max(first, second)}; !slices.Equal(tids, want) {
		t.Errorf("Dirtiers = %v (threads %v), want the two writers %v and not the sibling's", got, tids, want)
	}
	if got, err := tr.Dirtiers(pid); err != nil || len(got) != 0 {
		t.Errorf("Dirtiers of the parent = %v, %v: want none, its children's writers are theirs", got, err)
	}
	// Armed again: the next new writer is reported.
	if err := tr.ArmDirtier(id); err != nil {
		t.Fatal(err)
	}
	third := startDD(t, w, filepath.Join(dir, "third"))
	if ev := awaitEvent(t, tr, dirtytrack.NewDirtier, id, wakeBound()+time.Second); ev.TID != third {
		t.Errorf("the report armed again named thread %d, want the third writer %d", ev.TID, third)
	}
}

// startDD starts a dd in c that writes to path until the test ends, and
// returns its PID (its only thread's id).
func startDD(t *testing.T, c *cgrouptest.Cgroup, path string) int {
	t.Helper()
	cmd := c.Start(t, "dd", "if=/dev/zero", "of="+path, "bs=64k", "count=1000000")
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		os.Remove(path)
	})
	return cmd.Process.Pid
}

// awaitDirtier waits until Dirtiers of id lists tid.
func awaitDirtier(t *testing.T, tr *dirtytrack.Tracker, id uint64, tid int) {
	t.Helper()
	deadline := time.Now().Add(wakeBound() + 5*time.Second)
	for {
		got, err := tr.Dirtiers(id)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(got, func(d dirtytrack.Dirtier) bool { return d.TID == tid }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Dirtiers = %v: thread %d, a writer, not listed", got, tid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A dirty file deleted before it was written counts as cancelled, by as
// much as memory.stat's dirty fell, and not as dirtied: the daemon tells
// such a fall from the device's writing by it.
func TestCancelledCountsADeletedDirtyFile(t *testing.T) {
	l := cgrouptest.Layout(t)
	tr := load(t)
	if !tr.CountsCancels() {
		if os.Getenv("CI") == "true" {
			t.Fatal("the ext4_invalidate_folio program did not attach")
		}
		t.Skip("the ext4_invalidate_folio program did not attach")
	}
	c := cgrouptest.New(t, l, 0)
	id := cgroupID(t, c)
	if err := tr.Watch(id, dirtytrack.Never); err != nil {
		t.Fatal(err)
	}
	// On a shared machine another process's sync(2) may write the file
	// back before its deletion: wait for memory.stat to show the pages
	// dirty, and for it to show their fall after the delete; try again
	// with a new file when the pages were written back meanwhile.
	var before, after dirtytrack.Counts
	var fell int64
	for try := 1; ; try++ {
		file := filepath.Join(diskDir(t), fmt.Sprintf("doomed-%d", try))
		cgrouptest.DirtyFile(t, c, file, 16*mib)
		dirty := awaitDirtyWB(t, l, c, func(v uint64) bool { return v >= 12*mib })
		var err error
		if before, err = tr.Counts(id); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
		if after, err = tr.Counts(id); err != nil {
			t.Fatal(err)
		}
		fell = int64(dirty) - int64(awaitDirtyWB(t, l, c, func(v uint64) bool { return v+8*mib <= dirty }))
		if fell >= 8*mib || try == 3 {
			break
		}
		t.Logf("try %d: dirty+writeback fell only %d bytes at the delete (written back first?); again", try, fell)
	}
	got := after.Cancelled - before.Cancelled
	t.Logf("deleted a file with 16 MiB dirty: memory.stat dirty+writeback fell %d bytes, cancelled %d, dirtied %d",
		fell, got, after.Dirtied-before.Dirtied)
	if !after.HasCancelled {
		t.Error("Counts.HasCancelled false though the program is attached")
	}
	if fell < 8*mib {
		t.Fatalf("precondition: dirty+writeback fell only %d bytes at the delete (written back first?)", fell)
	}
	if !within(got, uint64(fell), slack(got)) {
		t.Errorf("cancelled %d bytes, want about the %d dirty+writeback fell by", got, fell)
	}
	if d := after.Dirtied - before.Dirtied; d > slack(0) {
		t.Errorf("the delete counted %d bytes dirtied", d)
	}
}

// The level counts dirty+writeback as memory.stat does: after a write,
// after its writeback (fsync) and after a dirty file's deletion, the
// level's change since the watch equals memory.stat's, and an armed
// bound reports its crossing upwards and downwards. It needs the level
// programs (fentry), which the test VMs' kernel allows; on a kernel that
// refuses them, TestNoLevelsSayWhy runs instead.
func TestLevelAgreesWithMemoryStat(t *testing.T) {
	l := cgrouptest.Layout(t)
	tr := loadOptions(t, dirtytrack.Options{Levels: true})
	if !tr.CountsLevels() {
		if os.Getenv("MEMCGD_VM") == "1" {
			t.Fatalf("no level programs in the test VM: %s", tr.NoLevels())
		}
		t.Skipf("this kernel refuses the level programs (%s); TestNoLevelsSayWhy checks that, and the VMs run this test", tr.NoLevels())
	}
	c := cgrouptest.New(t, l, 0)
	id := cgroupID(t, c)
	if err := tr.Watch(id, dirtytrack.Never); err != nil {
		t.Fatal(err)
	}
	dir := diskDir(t)
	base := int64(dirtyWB(t, l, c)) // 0 for a new cgroup, but for a flush race
	level := func() int64 {
		t.Helper()
		n, err := tr.Counts(id)
		if err != nil {
			t.Fatal(err)
		}
		if !n.HasLevel {
			t.Fatal("Counts.HasLevel false though the level programs are attached")
		}
		return n.Level
	}
	// check waits up to 3 s for memory.stat, which lags the counters (its
	// per-CPU stats are flushed lazily), to agree with the level.
	check := func(what string) {
		t.Helper()
		var got, want int64
		var match bool
		awaitDirtyWB(t, l, c, func(v uint64) bool {
			got, want = level(), int64(v)-base
			d := got - want
			if d < 0 {
				d = -d
			}
			match = uint64(d) <= slack(uint64(max(want, 0)))
			return match
		})
		if !match {
			t.Errorf("%s: level %d bytes, memory.stat's dirty+writeback moved %d since the watch", what, got, want)
			return
		}
		t.Logf("%s: level %d, memory.stat dirty+writeback %d since the watch", what, got, want)
	}
	file := filepath.Join(dir, "level")
	cgrouptest.DirtyFile(t, c, file, 24*mib)
	check("after 24 MiB written")
	cgrouptest.SyncFile(t, file)
	check("after its fsync")
	doomed := filepath.Join(dir, "doomed")
	cgrouptest.DirtyFile(t, c, doomed, 16*mib)
	check("after 16 MiB more")
	if err := os.Remove(doomed); err != nil {
		t.Fatal(err)
	}
	check("after that file's deletion")

	// Crossings: up past 8 MiB over the level now, then down below 4 MiB
	// over it while the written file is synced.
	now := level()
	if err := tr.ArmLevel(id, now+8*mib, math.MinInt64); err != nil {
		t.Fatal(err)
	}
	cgrouptest.DirtyFile(t, c, file, 16*mib)
	if ev := awaitEvent(t, tr, dirtytrack.LevelCrossed, id, wakeBound()+time.Second); ev.DirtyLevel <= now+8*mib {
		t.Errorf("reported the level at %d, armed to report above %d", ev.DirtyLevel, now+8*mib)
	}
	if err := tr.ArmLevel(id, math.MaxInt64, now+4*mib); err != nil {
		t.Fatal(err)
	}
	cgrouptest.SyncFile(t, file)
	if ev := awaitEvent(t, tr, dirtytrack.LevelCrossed, id, wakeBound()+time.Second); ev.DirtyLevel >= now+4*mib {
		t.Errorf("reported the level at %d, armed to report below %d", ev.DirtyLevel, now+4*mib)
	}
}

// Not asked for, the level programs are not loaded, and the tracker says
// so. On a kernel that refuses them the tracker still loads, counts no
// level, and says why.
func TestNoLevelsSayWhy(t *testing.T) {
	if tr := load(t); tr.CountsLevels() || !strings.Contains(tr.NoLevels(), "not asked") {
		t.Errorf("without Options.Levels: CountsLevels %v, NoLevels %q; want false, not asked for", tr.CountsLevels(), tr.NoLevels())
	}
	tr := loadOptions(t, dirtytrack.Options{Levels: true})
	if tr.CountsLevels() {
		t.Skip("this kernel runs the level programs: TestLevelAgreesWithMemoryStat checks them")
	}
	if !strings.Contains(tr.NoLevels(), "fentry") {
		t.Errorf("NoLevels = %q, want the fentry programs named", tr.NoLevels())
	}
	c := cgrouptest.New(t, cgrouptest.Layout(t), 0)
	id := cgroupID(t, c)
	if err := tr.Watch(id, dirtytrack.Never); err != nil {
		t.Fatal(err)
	}
	n, err := tr.Counts(id)
	if err != nil || n.HasLevel {
		t.Errorf("Counts = %+v, %v: want HasLevel false", n, err)
	}
}
