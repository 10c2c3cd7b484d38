package cgroupfs_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/dirtytrack"
	"github.com/memcgd/memcgd/cgroupfs/watch"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"golang.org/x/sys/unix"
)

const mib = 1 << 20

// The helper dirtier: the test binary run again with these variables set
// joins the memory cgroup, then for each number N read from stdin takes
// CLOCK_MONOTONIC, write(2)s N new bytes to its file in one call, and
// prints the time it took before the call.
const (
	envDirtierFile = "MEMCGD_TEST_DIRTIER_FILE"
	envDirtierJoin = "MEMCGD_TEST_DIRTIER_JOIN"
)

// TestFastPathHelperDirtier is not a test: it is the body of the helper
// dirtier, and returns at once in a normal run.
func TestFastPathHelperDirtier(t *testing.T) {
	file, join := os.Getenv(envDirtierFile), os.Getenv(envDirtierJoin)
	if file == "" {
		return
	}
	if err := os.WriteFile(filepath.Join(join, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		os.Exit(2)
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		os.Exit(3)
	}
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		n, err := strconv.Atoi(in.Text())
		if err != nil {
			os.Exit(4)
		}
		buf := make([]byte, n)
		t0 := dirtytrack.MonotonicNow()
		if _, err := f.Write(buf); err != nil {
			os.Exit(5)
		}
		fmt.Println(int64(t0))
	}
	os.Exit(0)
}

// dirtier is a running helper dirtier.
type dirtier struct {
	in  *os.File
	out *bufio.Scanner
}

// startDirtier starts the helper dirtier in c, writing a file on disk.
func startDirtier(t *testing.T, c *cgrouptest.Cgroup) *dirtier {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFastPathHelperDirtier$")
	cmd.Env = append(os.Environ(), envDirtierFile+"="+filepath.Join(cgrouptest.DiskDir(t), "data"), envDirtierJoin+"="+c.Dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	d := &dirtier{in: stdin.(*os.File), out: bufio.NewScanner(stdout)}
	if !d.out.Scan() || d.out.Text() != "ready" {
		t.Fatalf("helper dirtier did not start: %q %v", d.out.Text(), d.out.Err())
	}
	return d
}

// write makes the dirtier write n bytes and returns when, on
// CLOCK_MONOTONIC, its write(2) began.
func (d *dirtier) write(t *testing.T, n int) time.Duration {
	t.Helper()
	if _, err := fmt.Fprintln(d.in, n); err != nil {
		t.Fatal(err)
	}
	if !d.out.Scan() {
		t.Fatalf("helper dirtier: %v", d.out.Err())
	}
	t0, err := strconv.ParseInt(d.out.Text(), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(t0)
}

// awaitWake waits up to d for cg on the Watcher's Events and returns
// when it came, on CLOCK_MONOTONIC; ok is false if it did not.
func awaitWake(events <-chan host.Cgroup, cg host.Cgroup, d time.Duration) (at time.Duration, ok bool) {
	deadline := time.After(d)
	for {
		select {
		case got := <-events:
			if got == cg {
				return dirtytrack.MonotonicNow(), true
			}
		case <-deadline:
			return 0, false
		}
	}
}

// wakeBound is how soon a report must follow the write(2) that passed
// DirtiedAbove in this test: issue 7 asks p99 <= 2 ms, which the test
// prints; it fails only past a bound a loaded machine (and the TCG VM)
// keeps.
const wakeBound = time.Second

// With the tracker, a watched cgroup is reported through the Watcher's
// Events once what it dirtied passes Wake.DirtiedAbove, and not before:
// a write short of the threshold is not reported. It prints the latency
// from the write(2) to the receipt.
func TestTrackedWatcherReportsDirtiedAbove(t *testing.T) {
	l := cgrouptest.Layout(t)
	tr := cgrouptest.LoadTracker(t)
	fs := cgrouptest.FS(t, l, "/", nil, tr)
	if p := fs.DirtyPath(); !p.Tracker {
		t.Fatalf("DirtyPath() = %v, want the tracker", p)
	}
	c := cgrouptest.New(t, l, 0)
	w, err := fs.NewWatcher(watch.WatcherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	d := startDirtier(t, c)
	ctx := context.Background()

	const room, step = 256 << 10, 512 << 10
	arm := func() uint64 {
		n, err := fs.DirtyCounts(ctx, c.Path)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Watch(c.Path, host.Wake{UsageAbove: memcg.NoLimit, DirtiedAbove: n.Dirtied + room}); err != nil {
			t.Fatal(err)
		}
		return n.Dirtied
	}

	// Short of the threshold: no report.
	before := arm()
	d.write(t, room/2)
	if _, ok := awaitWake(w.Events(), c.Path, 200*time.Millisecond); ok {
		t.Errorf("reported after dirtying %d bytes, short of DirtiedAbove (counter %d -> armed %d)", room/2, before, before+room)
	}

	var lat []time.Duration
	for i := range 30 {
		before := arm()
		t0 := d.write(t, step)
		at, ok := awaitWake(w.Events(), c.Path, wakeBound)
		if !ok {
			t.Fatalf("write %d: dirtied %d bytes past DirtiedAbove %d (counter %d), not reported within %v", i, step, before+room, before, wakeBound)
		}
		lat = append(lat, max(at-t0, 0))
		after, err := fs.DirtyCounts(ctx, c.Path)
		if err != nil {
			t.Fatal(err)
		}
		if after.Dirtied < before+step {
			t.Errorf("write %d: Dirtied %d -> %d after %d new bytes, want at least %d more", i, before, after.Dirtied, step, step)
		}
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(time.Microsecond) }
	t.Logf("write(2) to Watcher report: %d wake-ups, p50 %v, p90 %v, p99 %v, max %v", len(lat), q(0.5), q(0.9), q(0.99), q(1))
}

// With the tracker, FS.WriteOut writes out a file the cgroup's task closed
// (which the /proc scan cannot find, as the fallback shows), and leaves a
// sibling cgroup's dirty pages alone.
func TestFSWriteOutWritesClosedFiles(t *testing.T) {
	l := cgrouptest.Layout(t)
	tr := cgrouptest.LoadTracker(t)
	size := cgrouptest.DirtySize(t)
	dir := cgrouptest.DiskDir(t)
	target, sibling := cgrouptest.New(t, l, 0), cgrouptest.New(t, l, 0)
	// Earlier tests' dirty pages may hold the host near its background
	// threshold, past which the flushers would write ours back first.
	unix.Sync()
	cgrouptest.DirtyFile(t, target, filepath.Join(dir, "target"), size)
	cgrouptest.DirtyFile(t, sibling, filepath.Join(dir, "sibling"), size)
	targetBefore, siblingBefore := target.Dirty(t), sibling.Dirty(t)
	for _, d := range []uint64{targetBefore, siblingBefore} {
		if d < uint64(size/2) {
			t.Fatalf("precondition: a cgroup holds %d MiB dirty, want about %d MiB (did the flusher run?)", d/mib, size/mib)
		}
	}
	ctx := context.Background()

	// The fallback: the writer has exited, no task has the file open.
	w, err := cgrouptest.FS(t, l, "/", nil, nil).WriteOut(ctx, target.Path, target.Dirty(t))
	if err != nil {
		t.Fatalf("WriteOut without the tracker: %v", err)
	}
	if w.Files != 0 {
		t.Fatalf("WriteOut without the tracker started %d files, want 0: the file is closed", w.Files)
	}

	// A write-out every 5 ms, as a throttled cgroup's steps bring them:
	// each is budgeted and goes on where the last one stopped.
	fs := cgrouptest.FS(t, l, "/", nil, tr)
	start := time.Now()
	var (
		targetAfter uint64
		call        time.Duration
	)
	for calls := 0; ; calls++ {
		callStart := time.Now()
		w, err = fs.WriteOut(ctx, target.Path, target.Dirty(t))
		call = max(call, time.Since(callStart))
		if err != nil {
			t.Fatalf("WriteOut with the tracker: %v", err)
		}
		if calls == 0 && w.Files != 1 {
			t.Errorf("WriteOut with the tracker = %+v, want 1 file", w)
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
	t.Logf("closed-file write-out: target dirty %.1f -> %.1f MiB in %v (the longest call %v), sibling %.1f -> %.1f MiB (%.0f%% kept)",
		float64(targetBefore)/mib, float64(targetAfter)/mib, took.Round(time.Millisecond), call.Round(time.Microsecond),
		float64(siblingBefore)/mib, float64(siblingAfter)/mib, retained)
	if targetAfter > targetBefore/10 {
		t.Errorf("target cgroup dirty %d MiB after 1 s, want at most 10%% of %d MiB", targetAfter/mib, targetBefore/mib)
	}
	if retained < 90 {
		t.Errorf("sibling kept %.0f%% of its dirty pages, want at least 90%%", retained)
	}
}

// With the tracker, FS.WriteOut writes out at once the files the cgroup's
// subtree dirtied since it was first counted, and takes what the
// tracker's recent files lack (every record, and the files its tasks hold
// open) only at its first write-out and then once every ListEvery. Here a
// file its child dirtied before the cgroup was counted, which a task then
// opens for writing, is written out by the first write-out after
// ListEvery, not by one before; a file the child dirtied and closed after
// the count, by the next write-out.
func TestFSWriteOutTakesRecentFilesAndListsEveryListEvery(t *testing.T) {
	l := cgrouptest.Layout(t)
	tr := cgrouptest.LoadTracker(t)
	size := cgrouptest.DirtySize(t)
	parent := cgrouptest.New(t, l, 0)
	child := parent.Child(t, "c")
	dir := cgrouptest.DiskDir(t)
	old, recent := filepath.Join(dir, "old"), filepath.Join(dir, "recent")
	unix.Sync()
	cgrouptest.DirtyFile(t, child, old, size)
	before := child.Dirty(t)
	if before < uint64(size/2) {
		t.Fatalf("precondition: the child holds %d MiB dirty, want about %d MiB (did the flusher run?)", before/mib, size/mib)
	}
	fs := cgrouptest.FS(t, l, "/", nil, tr)
	ctx := context.Background()
	first := time.Now()
	w, err := fs.WriteOut(ctx, parent.Path, parent.Dirty(t))
	if err != nil {
		t.Fatalf("first WriteOut: %v", err)
	}
	if w.Files != 0 {
		t.Fatalf("first WriteOut = %+v, want no file: the file is closed and was dirtied before the parent was counted", w)
	}
	// A task of the child opens the old file for writing, without
	// writing; another dirties a new file and exits.
	holder := child.Start(t, "sh", "-c", `exec 5>>"$0"; exec sleep 3600`, old)
	cgrouptest.AwaitOpen(t, holder.Process.Pid, old)
	cgrouptest.DirtyFile(t, child, recent, mib)

	w, err = fs.WriteOut(ctx, parent.Path, parent.Dirty(t))
	if err != nil {
		t.Fatalf("WriteOut within ListEvery: %v", err)
	}
	if gap := time.Since(first); gap >= cgroupfs.ListEvery {
		t.Fatalf("the second WriteOut came %v after the first, not within ListEvery (%v): the host is too slow for this test", gap, cgroupfs.ListEvery)
	}
	if w.Files != 1 {
		t.Errorf("WriteOut within ListEvery of the first = %+v, want 1 file: the recent one, not the old one held open", w)
	}
	if d := child.Dirty(t); d < before/2 {
		t.Errorf("child dirty %d MiB after a WriteOut within ListEvery, want most of the old file's %d MiB left", d/mib, before/mib)
	}

	time.Sleep(time.Until(first.Add(cgroupfs.ListEvery)))
	w, err = fs.WriteOut(ctx, parent.Path, parent.Dirty(t))
	if err != nil {
		t.Fatalf("WriteOut after ListEvery: %v", err)
	}
	if w.Files < 1 {
		t.Errorf("WriteOut after ListEvery = %+v, want the old file: the listing finds it open", w)
	}
	// The write-outs that follow, every 5 ms as a throttled cgroup's
	// steps bring them, take the recent files only, and go on with the
	// files the listing found.
	deadline := time.Now().Add(time.Second)
	for child.Dirty(t) > before/10 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		if _, err := fs.WriteOut(ctx, parent.Path, parent.Dirty(t)); err != nil {
			t.Fatalf("WriteOut after the listing: %v", err)
		}
	}
	if d := child.Dirty(t); d > before/10 {
		t.Errorf("child dirty %d MiB 1 s after the listing write-out, want at most 10%% of %d MiB", d/mib, before/mib)
	}
}

// A write-out of a cgroup removed since the step that decided it fails
// with nothing but host.ErrVanished, which the daemon takes as the cgroup
// gone, where another error would be counted and logged: before the daemon
// forgets it (nothing to write and no error: the next step's observation
// finds it gone) and after.
func TestFSWriteOutOfARemovedCgroupSaysItVanished(t *testing.T) {
	l := cgrouptest.Layout(t)
	tr := cgrouptest.LoadTracker(t)
	parent := cgrouptest.New(t, l, 0)
	child := parent.Child(t, "c")
	fs := cgrouptest.FS(t, l, "/", nil, tr)
	ctx := context.Background()
	if _, err := fs.WriteOut(ctx, child.Path, 0); err != nil { // the tracker counts it from here
		t.Fatalf("WriteOut: %v", err)
	}
	if err := os.Remove(child.Dir); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.WriteOut(ctx, child.Path, 0); err != nil && !errors.Is(err, host.ErrVanished) {
		t.Errorf("WriteOut of the removed cgroup: %v, want nil or an error wrapping host.ErrVanished", err)
	}
	fs.Forget(child.Path)
	if _, err := fs.WriteOut(ctx, child.Path, 0); !errors.Is(err, host.ErrVanished) {
		t.Errorf("WriteOut of the removed cgroup once forgotten: %v, want an error wrapping host.ErrVanished", err)
	}
}
