package act_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/act"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/format"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/internal/sandbox"
)

// The helper writer: the test binary run again with these variables set
// joins the memory cgroup and dirties pages of the file for ever.
const (
	envWriterFile = "MEMCGD_TEST_FREEZER_WRITER"
	envWriterJoin = "MEMCGD_TEST_FREEZER_JOIN"
)

// writerWindow is how much of its file the helper writer dirties before it
// truncates the file and starts again: truncating drops the dirty pages, so
// that each write dirties new ones and /proc/PID/io write_bytes keeps
// growing while the writer runs (a page dirtied twice counts once,
// mm/page-writeback.c folio_account_dirtied).
const writerWindow = 32 << 20

// TestFreezerHelperWriter is not a test: it is the body of the helper
// writer process, and returns at once in a normal run.
func TestFreezerHelperWriter(t *testing.T) {
	file, join := os.Getenv(envWriterFile), os.Getenv(envWriterJoin)
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
	buf := make([]byte, 64<<10)
	for off := int64(0); ; off += int64(len(buf)) {
		if off >= writerWindow {
			if err := f.Truncate(0); err != nil {
				os.Exit(4)
			}
			off = 0
		}
		if _, err := f.WriteAt(buf, off); err != nil {
			os.Exit(5)
		}
	}
}

// startWriter starts the helper writer in the memory cgroup at memDir and
// returns once it is there. At cleanup it thaws freezer (when not "") and
// kills and reaps the writer.
func startWriter(t *testing.T, memDir, freezer string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFreezerHelperWriter$")
	cmd.Env = append(os.Environ(), envWriterFile+"="+filepath.Join(t.TempDir(), "data"), envWriterJoin+"="+memDir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if freezer != "" {
			_ = sandbox.WriteFile(filepath.Join(freezer, "freezer.state"), "THAWED") // a frozen task cannot die
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(sandbox.Settle); ; {
		pids, err := sandbox.Tasks(memDir)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(pids, cmd.Process.Pid) {
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("writer %d did not join %s within %v", cmd.Process.Pid, memDir, sandbox.Settle)
		}
		time.Sleep(time.Millisecond)
	}
}

// memoryOnly creates the cgroup cg in the memory hierarchy only, as systemd
// or YARN do on a legacy host, and removes it at cleanup.
func memoryOnly(t *testing.T, l layout.Layout, cg host.Cgroup) *sandbox.Cgroup {
	t.Helper()
	c, err := sandbox.Create(l, cg, sandbox.Options{Mirror: false})
	if c != nil {
		t.Cleanup(func() {
			if err := c.Remove(); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// freezerOfTask reads pid's freezer cgroup.
func freezerOfTask(t *testing.T, pid int) host.Cgroup {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	lines, err := format.ParseProcCgroup(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if l.Has("freezer") {
			return host.Cgroup(l.Path)
		}
	}
	t.Fatalf("task %d has no freezer cgroup", pid)
	return ""
}

// v1Freezer returns the host's layout when it has a v1 memory and a v1
// freezer hierarchy, and the parent for the test's cgroups: a cgroup beneath
// the test process's own, mirrored in the freezer hierarchy by
// cgrouptest, so that the freezer directories between the root and it are
// created and removed under sandbox's protocol.
func v1Freezer(t *testing.T) (layout.Layout, *cgrouptest.Cgroup) {
	t.Helper()
	l := cgrouptest.Layout(t)
	if l.Memory.Version != layout.V1 {
		t.Skipf("memory is on %s, whose cgroup.freeze every cgroup has: no v1 freezer to create", l.Memory.Version)
	}
	if l.Freezer == nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no v1 freezer hierarchy mounted")
		}
		t.Skip("no v1 freezer hierarchy mounted")
	}
	p := cgrouptest.New(t, l, 0)
	if _, ok := l.FreezerDir(p.Path); !ok {
		t.Fatalf("test cgroup %s has no freezer mirror: the test process's freezer cgroup is not an ancestor", p.Path)
	}
	return l, p
}

// dirtied reads what cg's tasks have dirtied.
func dirtied(t *testing.T, l layout.Layout, cg host.Cgroup) uint64 {
	t.Helper()
	n, err := act.Dirtied(context.Background(), "/proc", l, cg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// awaitFreezer waits until the v1 freezer cgroup at dir reports state.
func awaitFreezer(t *testing.T, dir, state string) {
	t.Helper()
	p := filepath.Join(dir, "freezer.state")
	for deadline := time.Now().Add(sandbox.Settle); ; {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(b)) == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still %q after %v, want %s", p, strings.TrimSpace(string(b)), sandbox.Settle, state)
		}
		time.Sleep(time.Millisecond)
	}
}

// A memory-only cgroup is throttled through a freezer cgroup EnsureFreezer
// creates at its path: the writer's tasks move there, a freeze stops them
// (what they dirtied stops growing), a thaw resumes them, a task that
// joins the memory cgroup later is swept in by the next call, and cleanup
// leaves no freezer directory behind.
func TestEnsureFreezerThrottlesAMemoryOnlyCgroup(t *testing.T) {
	l, p := v1Freezer(t)
	v1only := l
	v1only.Unified = nil // Pause through the v1 freezer, as on a host without a unified mirror
	cg := host.Cgroup(path.Join(string(p.Path), "svc"))
	sub := host.Cgroup(path.Join(string(cg), "worker"))
	frzDir, subFrzDir := l.Freezer.Dir(cg), l.Freezer.Dir(sub)
	// Registered before the cgroups and the writers, so that it runs after
	// they are gone: nothing EnsureFreezer made may stay.
	var made []string
	t.Cleanup(func() {
		for deadline := time.Now().Add(sandbox.Settle); ; {
			// A killed task leaves its cgroup a moment after it is reaped.
			if err := act.RemoveFreezer(made); err != nil {
				t.Errorf("RemoveFreezer: %v", err)
			}
			_, err1 := os.Stat(frzDir)
			_, err2 := os.Stat(subFrzDir)
			if errors.Is(err1, os.ErrNotExist) && errors.Is(err2, os.ErrNotExist) {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("cleanup left %s or %s behind", frzDir, subFrzDir)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	c := memoryOnly(t, l, cg)
	sc := memoryOnly(t, l, sub)
	a := startWriter(t, c.Dir, frzDir)
	if got := freezerOfTask(t, a.Process.Pid); got != "/" {
		t.Fatalf("writer starts in freezer cgroup %s, want the root (the test process's)", got)
	}

	// Before: no freezer has the cgroup.
	err := act.Pause(context.Background(), v1only, cg, time.Millisecond, cgrouptest.Journal(t, l))
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Pause before EnsureFreezer: %v, want errors.ErrUnsupported", err)
	}

	m, err := act.EnsureFreezer(l, "/proc", cg)
	made = append(made, m.Made...)
	if err != nil {
		t.Fatalf("EnsureFreezer: %v", err)
	}
	t.Logf("EnsureFreezer: %+v", m)
	if m.Dir != frzDir || !slices.Contains(m.Made, frzDir) || !slices.Equal(m.Moved, []int{a.Process.Pid}) {
		t.Errorf("EnsureFreezer = %+v, want Dir %s made and task %d moved", m, frzDir, a.Process.Pid)
	}
	if got := freezerOfTask(t, a.Process.Pid); got != cg {
		t.Errorf("writer's freezer cgroup %s after EnsureFreezer, want %s", got, cg)
	}
	if err := act.Pause(context.Background(), v1only, cg, time.Millisecond, cgrouptest.Journal(t, l)); err != nil {
		t.Errorf("Pause after EnsureFreezer: %v", err)
	}

	// A task joining later, in a child memory cgroup, is swept in at its
	// own path, its freezer parents created.
	b := startWriter(t, sc.Dir, frzDir)
	m2, err := act.EnsureFreezer(l, "/proc", cg)
	made = append(made, m2.Made...)
	if err != nil {
		t.Fatalf("second EnsureFreezer: %v", err)
	}
	if !slices.Equal(m2.Moved, []int{b.Process.Pid}) || !slices.Equal(m2.Made, []string{subFrzDir}) {
		t.Errorf("second EnsureFreezer = %+v, want %s made and task %d moved", m2, subFrzDir, b.Process.Pid)
	}
	if got := freezerOfTask(t, b.Process.Pid); got != sub {
		t.Errorf("late writer's freezer cgroup %s, want %s", got, sub)
	}
	m3, err := act.EnsureFreezer(l, "/proc", cg)
	if err != nil || len(m3.Made)+len(m3.Moved) != 0 {
		t.Errorf("third EnsureFreezer = %+v, %v; want nothing to do", m3, err)
	}

	// Frozen: nothing dirtied in window. Running: something dirtied within
	// a second, since the kernel's own dirty throttling
	// (mm/page-writeback.c balance_dirty_pages) may pause a writer for up
	// to 200 ms when other writers on the machine are near its limits.
	const window = 100 * time.Millisecond
	growth := func(cg host.Cgroup) uint64 {
		before := dirtied(t, l, cg)
		time.Sleep(window)
		return dirtied(t, l, cg) - before
	}
	resumes := func(cg host.Cgroup) (uint64, time.Duration) {
		before, start := dirtied(t, l, cg), time.Now()
		for time.Since(start) < time.Second {
			time.Sleep(10 * time.Millisecond)
			if n := dirtied(t, l, cg) - before; n > 0 {
				return n, time.Since(start)
			}
		}
		return 0, time.Since(start)
	}
	if n, d := resumes(cg); n == 0 {
		t.Fatalf("running writers dirtied nothing in %v", d)
	}
	if n, d := resumes(sub); n == 0 {
		t.Fatalf("running late writer dirtied nothing in %v", d)
	}
	if err := sandbox.WriteFile(filepath.Join(frzDir, "freezer.state"), "FROZEN"); err != nil {
		t.Fatal(err)
	}
	awaitFreezer(t, frzDir, "FROZEN")
	frozen := growth(cg)
	if err := sandbox.WriteFile(filepath.Join(frzDir, "freezer.state"), "THAWED"); err != nil {
		t.Fatal(err)
	}
	awaitFreezer(t, frzDir, "THAWED")
	thawedA, da := resumes(cg)
	thawedB, db := resumes(sub)
	t.Logf("frozen: dirtied %d bytes in %v; thawed: %d bytes in %v (the late writer's %d in %v)",
		frozen, window, thawedA, da.Round(time.Millisecond), thawedB, db.Round(time.Millisecond))
	if frozen != 0 {
		t.Errorf("frozen writers dirtied %d bytes in %v, want 0", frozen, window)
	}
	if thawedA == 0 || thawedB == 0 {
		t.Errorf("thawed writers dirtied %d bytes (the late writer's %d) within a second, want both > 0", thawedA, thawedB)
	}
}

// A task that someone placed in another freezer cgroup stays there, and
// EnsureFreezer says the cgroup cannot be throttled, naming the task,
// without creating or moving anything.
func TestEnsureFreezerLeavesAForeignFreezerCgroup(t *testing.T) {
	l, p := v1Freezer(t)
	cg := host.Cgroup(path.Join(string(p.Path), "svc"))
	alien := filepath.Join(l.Freezer.Dir(p.Path), "alien")
	if err := os.Mkdir(alien, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for deadline := time.Now().Add(sandbox.Settle); ; {
			err := os.Remove(alien)
			if err == nil || time.Now().After(deadline) {
				if err != nil {
					t.Errorf("cleanup: %v", err)
				}
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	c := memoryOnly(t, l, cg)
	w := startWriter(t, c.Dir, "")
	if err := sandbox.WriteFile(filepath.Join(alien, "cgroup.procs"), strconv.Itoa(w.Process.Pid)); err != nil {
		t.Fatal(err)
	}

	m, err := act.EnsureFreezer(l, "/proc", cg)
	var tu *act.ThrottleUnavailable
	if !errors.As(err, &tu) || !strings.Contains(tu.Reason, strconv.Itoa(w.Process.Pid)) {
		t.Fatalf("EnsureFreezer = %+v, %v; want *ThrottleUnavailable naming task %d", m, err, w.Process.Pid)
	}
	t.Logf("%v", err)
	if len(m.Made)+len(m.Moved) != 0 {
		t.Errorf("EnsureFreezer made %v, moved %v; want nothing", m.Made, m.Moved)
	}
	if _, err := os.Stat(l.Freezer.Dir(cg)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("freezer %s exists (%v); want it not created", l.Freezer.Dir(cg), err)
	}
	if got, want := freezerOfTask(t, w.Process.Pid), host.Cgroup(path.Join(string(p.Path), "alien")); got != want {
		t.Errorf("task's freezer cgroup %s, want it left in %s", got, want)
	}
}

// FS.Freeze of a cgroup that exists only in the v1 memory hierarchy makes
// its freezer cgroup (EnsureFreezer) and holds it frozen until Thaw; the
// directory made is removed by Forget once the memory cgroup is gone. On a
// host whose only freezer is missing, Freeze reports the throttle
// unavailable and ThrottleUnavailable says why.
func TestFSFreezeMemoryOnlyCgroup(t *testing.T) {
	l, p := v1Freezer(t)
	v1only := l
	v1only.Unified = nil // the v1 freezer, as on a host without a unified mirror
	cg := host.Cgroup(path.Join(string(p.Path), "svc"))
	frzDir := l.Freezer.Dir(cg)
	fs := cgrouptest.FS(t, v1only, "/", cgrouptest.Journal(t, l), nil)
	// Registered before the cgroup and the writer, so that it runs after
	// they are gone.
	t.Cleanup(func() {
		for deadline := time.Now().Add(10 * time.Second); ; {
			fs.Forget(cg)
			if _, err := os.Stat(frzDir); errors.Is(err, os.ErrNotExist) {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("Forget left %s behind", frzDir)
				_ = act.RemoveFreezer([]string{frzDir})
				return
			}
			// A killed task leaves its freezer cgroup a moment after
			// it is reaped: Forget's RemoveFreezer then finds it busy.
			// Freeze again (it fails: the memory cgroup is gone) to
			// hand FS the directory again.
			time.Sleep(10 * time.Millisecond)
			_, _ = fs.Freeze(context.Background(), cg)
		}
	})
	c := memoryOnly(t, l, cg)
	a := startWriter(t, c.Dir, frzDir)
	if got := freezerOfTask(t, a.Process.Pid); got != "/" {
		t.Fatalf("writer starts in freezer cgroup %s, want the root", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f, err := fs.Freeze(ctx, cg)
	if err != nil {
		t.Fatalf("Freeze of a memory-only cgroup: %v", err)
	}
	defer f.End()
	if got := freezerOfTask(t, a.Process.Pid); got != cg {
		t.Errorf("writer in freezer cgroup %s after Freeze, want %s", got, cg)
	}
	if r := fs.ThrottleUnavailable(cg); r != "" {
		t.Errorf("ThrottleUnavailable = %q after a freeze that worked, want \"\"", r)
	}
	awaitFreezer(t, frzDir, "FROZEN")
	n0 := dirtied(t, l, cg)
	// That nothing happens has no event to wait for: the check is over
	// a window, and can fail because the same writer, thawed below, must
	// dirty again within a second.
	time.Sleep(100 * time.Millisecond)
	if n1 := dirtied(t, l, cg); n1 != n0 {
		t.Errorf("frozen: writer dirtied %d bytes in 100 ms, want 0", n1-n0)
	}
	if err := f.Thaw(); err != nil {
		t.Fatal(err)
	}
	awaitFreezer(t, frzDir, "THAWED")
	grew := false
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if dirtied(t, l, cg) > n0 {
			grew = true
			break
		}
	}
	if !grew {
		t.Error("thawed: writer dirtied nothing in 1 s")
	}
	if err := f.Refreeze(); err != nil {
		t.Fatal(err)
	}
	awaitFreezer(t, frzDir, "FROZEN")
	if err := f.End(); err != nil {
		t.Fatal(err)
	}
	awaitFreezer(t, frzDir, "THAWED")

	// No freezer at all: a layout without the v1 freezer hierarchy.
	none := v1only
	none.Freezer = nil
	nfs := cgrouptest.FS(t, none, "/", cgrouptest.Journal(t, l), nil)
	_, err = nfs.Freeze(ctx, cg)
	var tu *act.ThrottleUnavailable
	if !errors.As(err, &tu) || !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Freeze with no freezer: error %v, want a *ThrottleUnavailable", err)
	}
	if r := nfs.ThrottleUnavailable(cg); r == "" || r != tu.Reason || !strings.Contains(r, "freezer") {
		t.Errorf("ThrottleUnavailable = %q, want the reason %q", r, tu.Reason)
	}
	t.Logf("without a freezer: %v", err)
}
