package cgroupfs_test

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/dirtytrack"
	"github.com/memcgd/memcgd/cgroupfs/journal"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
)

// With the tracker, a thread that begins dirtying a paced cgroup's pages
// is paced within milliseconds (the tracker names it, FS moves it), not at
// the pace's next change: here the pace never changes, and the second
// writer, a new process started after the episode began, must join the
// pace group while it still writes.
func TestFSPacesAWriterThatBeginsMidEpisode(t *testing.T) {
	l, tr := paceWithTracker(t)
	c := cgrouptest.New(t, l, 2<<30)
	dir := cgrouptest.DiskDir(t)
	fs := cgrouptest.FS(t, l, host.Cgroup(path.Dir(string(c.Path))), cgrouptest.Journal(t, l), tr)
	ctx := t.Context()
	// The daemon counts a cgroup from its first step on.
	if _, err := fs.DirtyCounts(ctx, c.Path); err != nil {
		t.Fatal(err)
	}
	first := c.Start(t, "dd", "if=/dev/zero", "of="+filepath.Join(dir, "first"), "bs=1M", "count=100000")
	group := paceGroupThreads(l, c)
	awaitDirtier(t, tr, c, first.Process.Pid)
	e, err := fs.Pace(ctx, c.Path, time.Millisecond, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer e.End()
	if tids, err := journal.ReadTIDs(group); err != nil || !slices.Contains(tids, first.Process.Pid) {
		id, _ := dirtytrack.CgroupID(c.Dir)
		ds, derr := tr.Dirtiers(id)
		cgs, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", first.Process.Pid))
		t.Fatalf("the pace group holds %v (%v): want the first writer %d; the tracker's dirtiers %+v (%v); its cgroups:\n%s",
			tids, err, first.Process.Pid, ds, derr, cgs)
	}
	second := c.Start(t, "dd", "if=/dev/zero", "of="+filepath.Join(dir, "second"), "bs=1M", "count=100000")
	start := time.Now()
	for {
		tids, err := journal.ReadTIDs(group)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(tids, second.Process.Pid) {
			t.Logf("the second writer joined the pace group %v after its start, having written %d MiB",
				time.Since(start).Round(time.Millisecond), writeBytes(t, second.Process.Pid)/mib)
			return
		}
		if time.Since(start) > 2*time.Second {
			t.Fatalf("the second writer (%d) was not paced within 2 s of its start; the group holds %v", second.Process.Pid, tids)
		}
		time.Sleep(time.Millisecond)
	}
}

// paceWithTracker returns the layout and the tracker for a test of
// pacing with the tracker, or ends the test where the pacer does not run:
// the pacer tests run on the host's cgroup v1 cpu controller (act's
// paceable says why), and fail there in CI without it, and on cgroup v2
// where the VM enables the cpu controller.
func paceWithTracker(t *testing.T) (cgroupfs.Layout, *dirtytrack.Tracker) {
	t.Helper()
	l := cgrouptest.Layout(t)
	cgrouptest.SkipVMWithoutPacing(t, "the host runs the pacer tests")
	if l.CPU == nil && l.Memory.Version == layout.V1 {
		if os.Getenv("CI") == "true" {
			t.Fatal("no cpu controller on v1: cannot test the pacer")
		}
		t.Skip("no cpu controller on v1")
	}
	return l, cgrouptest.LoadTracker(t)
}

// paceGroupThreads is the file listing the threads of c's pace group: on
// v1 the tasks of memcgd.pace beneath c's cpu cgroup, on v2 the
// cgroup.threads of the threaded child memcgd.pace of c.
func paceGroupThreads(l cgroupfs.Layout, c *cgrouptest.Cgroup) string {
	if l.Memory.Version == layout.V2 {
		return filepath.Join(c.Dir, journal.PaceGroupName, journal.FileThreads)
	}
	return filepath.Join(l.CPU.Dir(c.Path), journal.PaceGroupName, journal.FileTasksV1)
}

// awaitDirtier waits, up to 10 s, until the tracker names thread tid
// among c's dirtiers of the last 50 ms. A write that /proc/PID/io counts
// is not yet one the tracker names: it refreshes a thread's entry every
// few folios (dirtytrack's Dirtiers), so a pace begun between the two
// finds no thread to move and leaves it to the episode's follower.
func awaitDirtier(t *testing.T, tr *dirtytrack.Tracker, c *cgrouptest.Cgroup, tid int) {
	t.Helper()
	id, err := dirtytrack.CgroupID(c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		ds, err := tr.Dirtiers(id)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(ds, func(d dirtytrack.Dirtier) bool { return d.TID == tid && d.Age <= 50*time.Millisecond }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tracker did not name thread %d among the dirtiers of %s within 10 s: %+v", tid, c.Path, ds)
		}
	}
}

// writeBytes is process pid's write_bytes (/proc/PID/io).
func writeBytes(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("/proc/%d/io has no write_bytes", pid)
	return 0
}

// An episode counts as unpaced a thread that dirties the cgroup's pages
// and that it cannot pace: here one whose cpu cgroup lies outside
// manage.under. The thread it paces is not counted.
func TestFSCountsADirtierItCannotPaceAsUnpaced(t *testing.T) {
	l, tr := paceWithTracker(t)
	if l.Memory.Version == layout.V2 {
		t.Skip("on v2 a thread's cpu cgroup is its memory cgroup: none lies outside manage.under while its memory cgroup is inside")
	}
	c := cgrouptest.New(t, l, 2<<30)
	inner := c.Child(t, "inner")
	dir := cgrouptest.DiskDir(t)
	// manage.under is c/inner: a thread whose cpu cgroup is c/inner may
	// be paced, one whose cpu cgroup is c may not.
	fs := cgrouptest.FS(t, l, inner.Path, cgrouptest.Journal(t, l), tr)
	ctx := t.Context()
	if _, err := fs.DirtyCounts(ctx, c.Path); err != nil {
		t.Fatal(err)
	}
	paceable := c.Start(t, "dd", "if=/dev/zero", "of="+filepath.Join(dir, "paceable"), "bs=1M", "count=100000")
	if err := os.WriteFile(filepath.Join(l.CPU.Dir(inner.Path), "tasks"), []byte(strconv.Itoa(paceable.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	awaitDirtier(t, tr, c, paceable.Process.Pid)
	e, err := fs.Pace(ctx, c.Path, time.Millisecond, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer e.End()
	pe, ok := e.(host.PacedEscapes)
	if !ok {
		t.Fatalf("%T is no host.PacedEscapes", e)
	}
	if n, ok := pe.Unpaced(); !ok || n != 0 {
		t.Errorf("with its one writer paced: Unpaced = %d, %v; want 0, true", n, ok)
	}
	escaping := c.Start(t, "dd", "if=/dev/zero", "of="+filepath.Join(dir, "escaping"), "bs=1M", "count=100000")
	awaitDirtier(t, tr, c, escaping.Process.Pid)
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n, ok := pe.Unpaced()
		if ok && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a second writer, whose cpu cgroup is outside manage.under: Unpaced = %d, %v; want 1, true", n, ok)
		}
	}
	group := filepath.Join(l.CPU.Dir(inner.Path), journal.PaceGroupName, journal.FileTasksV1)
	if tids, err := journal.ReadTIDs(group); err != nil || !slices.Equal(tids, []int{paceable.Process.Pid}) {
		t.Errorf("the pace group holds %v (%v): want the paceable writer %d alone", tids, err, paceable.Process.Pid)
	}
}
