package act_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs"
	"github.com/memcgd/memcgd/cgroupfs/act"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/internal/cputime"
	"golang.org/x/sys/unix"
)

const mib = 1 << 20

// writers starts, in each of n sibling cgroups, a writer that dirties size
// bytes of its own file and keeps it open for writing.
func writers(t *testing.T, l layout.Layout, n int, size int64) []*cgrouptest.Cgroup {
	t.Helper()
	dir := cgrouptest.DiskDir(t)
	var cs []*cgrouptest.Cgroup
	for i := range n {
		c := cgrouptest.New(t, l, 0)
		cgrouptest.StartWriter(t, c, filepath.Join(dir, "file"+strconv.Itoa(i)), size)
		cs = append(cs, c)
	}
	return cs
}

// seed 000: targeted write-out lowers that cgroup's dirty pages within 1 s
// while a sibling cgroup keeps at least 90% of its dirty pages. The
// write-outs come every 5 ms, as a throttled cgroup's steps bring them;
// each is budgeted (act.DefaultWriteOutBudget) and goes on where the
// last one stopped, and returns within its budget and one chunk's
// submission.
func TestWriteOutStartsOnlyTheCgroupsOwnFiles(t *testing.T) {
	l := cgrouptest.Layout(t)
	size := cgrouptest.DirtySize(t)
	cs := writers(t, l, 2, size)
	target, sibling := cs[0], cs[1]
	targetBefore, siblingBefore := target.Dirty(t), sibling.Dirty(t)
	for _, d := range []uint64{targetBefore, siblingBefore} {
		if d < uint64(size/2) {
			t.Fatalf("precondition: a writer's cgroup holds %d MiB dirty, want about %d MiB "+
				"(did the flusher run? dirty_expire_centisecs or the background threshold may be low)", d/mib, size/mib)
		}
	}

	fs := cgroupfs.NewFS(l, "/proc", "/", nil)
	start := time.Now()
	var (
		targetAfter uint64
		calls       int
		longest     time.Duration
	)
	for {
		callStart := time.Now()
		w, err := fs.WriteOut(context.Background(), target.Path, target.Dirty(t))
		longest = max(longest, time.Since(callStart))
		if err != nil {
			t.Fatalf("WriteOut: %v", err)
		}
		if calls++; calls == 1 && (w.Files != 1 || w.Bytes < uint64(size/2)) {
			t.Errorf("first WriteOut = %+v, want 1 file and about %d MiB", w, size/mib)
		}
		time.Sleep(5 * time.Millisecond)
		targetAfter = target.Dirty(t)
		if targetAfter <= targetBefore/10 || time.Since(start) > time.Second {
			break
		}
	}
	took := time.Since(start)
	siblingAfter := sibling.Dirty(t)
	retained := 100 * float64(siblingAfter) / float64(siblingBefore)
	t.Logf("write-out: target dirty %.1f -> %.1f MiB in %v (%d calls, the longest %v), sibling dirty %.1f -> %.1f MiB (%.0f%% kept)",
		float64(targetBefore)/mib, float64(targetAfter)/mib, took.Round(time.Millisecond), calls, longest.Round(time.Microsecond),
		float64(siblingBefore)/mib, float64(siblingAfter)/mib, retained)
	if targetAfter > targetBefore/10 {
		t.Errorf("target cgroup dirty %d MiB after 1 s, want at most 10%% of %d MiB", targetAfter/mib, targetBefore/mib)
	}
	if retained < 90 {
		t.Errorf("sibling kept %.0f%% of its dirty pages, want at least 90%%", retained)
	}
}

func TestWriteOutOfAVanishedCgroup(t *testing.T) {
	l := cgrouptest.Layout(t)
	c := cgrouptest.New(t, l, 0)
	gone := c.Child(t, "gone")
	if err := os.Remove(gone.Dir); err != nil {
		t.Fatal(err)
	}
	if _, err := cgroupfs.NewFS(l, "/proc", "/", nil).WriteOut(context.Background(), gone.Path, 0); !errors.Is(err, host.ErrVanished) {
		t.Errorf("WriteOut of a removed cgroup: error %v, want host.ErrVanished", err)
	}
}

// BenchmarkWriteOut measures one WriteOut of a real cgroup whose 8 tasks
// each hold a file open for writing (1 MiB written once; later calls find
// the pages clean, so this is the cost of finding and checking the files).
func BenchmarkWriteOut(b *testing.B) {
	l := cgrouptest.Layout(b)
	dir := b.TempDir()
	c := cgrouptest.New(b, l, 0)
	for i := range 8 {
		cgrouptest.StartWriter(b, c, filepath.Join(dir, "f"+strconv.Itoa(i)), 1<<20)
	}
	fs := cgroupfs.NewFS(l, "/proc", "/", nil)
	ctx := context.Background()
	dirty := c.Dirty(b) // the step's observation, which the daemon passes on
	b.ReportAllocs()
	cpu0, err := cputime.Self()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		w, err := fs.WriteOut(ctx, c.Path, dirty)
		if err != nil {
			b.Fatal(err)
		}
		if w.Files != 8 {
			b.Fatalf("WriteOut started %d files, want 8", w.Files)
		}
	}
	// CPU time, user and system: on a shared machine it varies less than
	// the wall time.
	reportCPU(b, cpu0)
}

// BenchmarkSweepCleanRange measures one sweep (act.SweepStride) of a
// clean range of a cached 1 GiB file on the test's filesystem whose last
// page is dirty (a file with no dirty page at all returns at once,
// filemap_fdatawrite_wbc): what each write-out adds for a file whose
// dirty pages are all in its tail.
func BenchmarkSweepCleanRange(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "big"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for range 1024 {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	if _, err := f.WriteAt(buf[:4096], 1<<30-4096); err != nil {
		b.Fatal(err)
	}
	fd := int(f.Fd())
	const swept = 1<<30 - act.SweepStride // the dirty page's stride left out
	var off int64
	cpu0, err := cputime.Self()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := unix.SyncFileRange(fd, off, act.SweepStride, unix.SYNC_FILE_RANGE_WRITE); err != nil {
			b.Fatal(err)
		}
		off = (off + act.SweepStride) % swept
	}
	reportCPU(b, cpu0)
}

// reportCPU reports the process's CPU time per op since cpu0
// (cputime.Self), as cpu-µs/op.
func reportCPU(b *testing.B, cpu0 time.Duration) {
	cpu, err := cputime.Self()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(cpu-cpu0)/float64(b.N)/1e3, "cpu-µs/op")
}
