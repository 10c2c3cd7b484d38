package act_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/act"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/journal"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
	"golang.org/x/sys/unix"
)

// paceable returns the layout if this host lets the pacer pace: the cpu
// controller on a v1 hierarchy, or memory on v2 with cpu available to
// the test's cgroups; else the test ends (a failure in CI). CI's test
// VMs run a kernel before 6.18, on which memcgd does not pace by default
// (cmd/memcgd/pace.go, pacing): they give their cgroups no cpu
// controller, and the host runs these tests
// (cgrouptest.SkipVMWithoutPacing).
func paceable(t testing.TB) layout.Layout {
	t.Helper()
	cgrouptest.SkipVMWithoutPacing(t, "the host runs the pacer tests")
	l := cgrouptest.Layout(t)
	if l.CPU == nil && l.Memory.Version != layout.V2 {
		if os.Getenv("CI") == "true" {
			t.Fatal("no cpu controller on v1 and memory not on v2: cannot test the pacer")
		}
		t.Skip("no cpu controller on v1 and memory not on v2")
	}
	return l
}

// paceableV2 is paceable for the tests of the cpu controller the pacer
// enables in a v2 leaf's cgroup.subtree_control; they skip on v1.
func paceableV2(t testing.TB) layout.Layout {
	t.Helper()
	l := paceable(t)
	if l.Memory.Version != layout.V2 {
		t.Skip("cgroup.subtree_control is v2's; a v1 pace group needs no controller enabled")
	}
	return l
}

// awaitDirtying waits, up to 10 s, until the tasks of cg have dirtied
// pages (act.Dirtied, their write_bytes): the dd started there is past its
// exec and writing, which is what the pacer looks for. On a loaded machine
// that can take longer than any fixed sleep.
func awaitDirtying(t *testing.T, l layout.Layout, cg host.Cgroup) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		n, err := act.Dirtied(t.Context(), "/proc", l, cg)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the writer in %s dirtied nothing within 10 s", cg)
		}
	}
}

// dirtyingWriter starts dd writing mib MiB in a new cgroup limited to
// 2 GiB and waits until it dirties; it returns the cgroup, the writer,
// the directory of the writer's cpu cgroup (where its pace group goes)
// and a pacer that may act beneath the cgroup's parent, with a journal of
// its own.
func dirtyingWriter(t *testing.T, l layout.Layout, mib int) (*cgrouptest.Cgroup, *exec.Cmd, string, *act.Pacer) {
	t.Helper()
	c := cgrouptest.New(t, l, 2<<30)
	writer := c.Start(t, "dd", "if=/dev/zero", "of="+filepath.Join(cgrouptest.DiskDir(t), "w"), "bs=1M", "count="+strconv.Itoa(mib))
	awaitDirtying(t, l, c.Path)
	p := &act.Pacer{Layout: l, ProcRoot: "/proc", Journal: cgrouptest.Journal(t, l), Under: host.Cgroup(path.Dir(string(c.Path)))}
	return c, writer, threadCgroup(t, l, writer.Process.Pid), p
}

// threadCgroup returns the directory of pid's cgroup in the pacer's
// hierarchy (v1 cpu, or the unified one on v2).
func threadCgroup(t testing.TB, l layout.Layout, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if l.CPU != nil && slices.Contains(strings.Split(f[1], ","), "cpu") {
			return l.CPU.Dir(host.Cgroup(f[2]))
		}
		if l.CPU == nil && f[0] == "0" {
			return l.Memory.Dir(host.Cgroup(f[2]))
		}
	}
	t.Fatalf("no cpu cgroup for %d", pid)
	return ""
}

// The pacer moves only the dirtying thread into a pace group beneath its
// own cpu cgroup, where CFS holds it to its quota; the cgroup's other
// task stays where it was; End puts the writer back and removes the
// group; nothing is left in the journal.
func TestThePacerPacesOnlyTheDirtyingThread(t *testing.T) {
	l := paceable(t)
	c := cgrouptest.New(t, l, 2<<30)
	j := cgrouptest.Journal(t, l)
	dir := cgrouptest.DiskDir(t)
	// A writer that outlasts the test's measure unpaced (1 GiB), and a
	// task that only sleeps.
	writer := c.Start(t, "dd", "if=/dev/zero", "of="+filepath.Join(dir, "w"), "bs=1M", "count=1024")
	sleeper := c.Start(t, "sleep", "3600")
	awaitDirtying(t, l, c.Path)
	home := threadCgroup(t, l, sleeper.Process.Pid)
	p := &act.Pacer{Layout: l, ProcRoot: "/proc", Journal: j, Under: host.Cgroup(path.Dir(string(c.Path)))}
	ctx := t.Context()
	e, err := p.Pace(ctx, c.Path, 2*time.Millisecond, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	pt, ok := e.(host.PacedThrottled)
	if !ok {
		t.Fatal("the episode does not tell how long its limit held its threads (host.PacedThrottled)")
	}
	group := filepath.Join(home, journal.PaceGroupName)
	file := journal.FileTasksV1
	if l.CPU == nil {
		file = journal.FileThreads
	}
	// A writer asleep in the kernel's dirty throttle all through the
	// pacer's samples (the VMs' disk writes 50 MB/s) is found at the
	// next change of the pace, as the daemon's next step makes one.
	var tids []int
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		tids, err = journal.ReadTIDs(filepath.Join(group, file))
		if err == nil && len(tids) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no thread in the pace group %s after 2 s of the pace's changes: %v", group, err)
		}
		if err := e.Set(2*time.Millisecond, 10*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if threadCgroup(t, l, sleeper.Process.Pid) != home {
		t.Errorf("the sleeper moved: it dirties nothing")
	}
	if !slices.Equal(tids, []int{writer.Process.Pid}) {
		t.Errorf("the pace group holds %v: want the dirtying dd alone (%d)", tids, writer.Process.Pid)
	}
	// Held to about 20 % of a CPU, by its own run time and by CPU().
	run0, cpu0, held0 := runtime(t, writer.Process.Pid), must(e.CPU()), must(pt.Throttled())
	time.Sleep(500 * time.Millisecond)
	run1, cpu1, held1 := runtime(t, writer.Process.Pid), must(e.CPU()), must(pt.Throttled())
	share := float64(run1-run0) / float64(500*time.Millisecond)
	t.Logf("paced at 2ms/10ms: %.2f of a CPU over 500 ms; CPU() counted %v of its %v", share, cpu1-cpu0, run1-run0)
	if share > 0.35 || share < 0.05 {
		t.Errorf("the paced writer used %.2f of a CPU, want about 0.2", share)
	}
	// Each CPU's throttled time counts, so at most the wall time on
	// each. A writer that ran its whole quota was held by the limit: the
	// time grew. One that ran less was held by the disk as well (the
	// kernel's dirty throttle, balance_dirty_pages, as in the VMs, whose
	// disk writes 50 MB/s), and the limit may never have held it.
	held := held1 - held0
	t.Logf("throttled %v in 500 ms", held)
	if held < 0 || held > time.Duration(goruntime.NumCPU())*600*time.Millisecond {
		t.Errorf("Throttled() grew by %v in 500 ms at 2ms/10ms: want at most the wall time on each CPU", held)
	}
	if held == 0 && share >= 0.18 {
		t.Errorf("Throttled() did not grow in 500 ms while the writer ran its whole quota (%.2f of a CPU at 2ms/10ms)", share)
	}
	// The two are read one after the other, not at once: allow what the
	// writer runs between the reads, on the VM's slow CPU too.
	slack := max(time.Millisecond, (run1-run0)/10)
	if d := (cpu1 - cpu0) - (run1 - run0); d < -slack || d > slack {
		t.Errorf("CPU() counted %v, the writer ran %v", cpu1-cpu0, run1-run0)
	}
	if len(j.Pending()) == 0 {
		t.Error("no journal record of the pace group while it exists")
	}
	if err := e.End(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(group); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the pace group %s is left after End: %v", group, err)
	}
	if p := j.Pending(); len(p) != 0 {
		t.Errorf("pending journal records after End: %v", p)
	}
}

// A thread killed while its pace holds it (1 ms of CPU a second) exits at
// once once End lifts the limit, and the group goes with the episode:
// a thread that is exiting cannot be moved out, and it keeps the group
// populated until its exit has run.
func TestThePacerEndsAnEpisodeWhoseThreadWasKilled(t *testing.T) {
	c, writer, home, p := dirtyingWriter(t, paceable(t), 100000)
	j := p.Journal
	e, err := p.Pace(t.Context(), c.Path, time.Millisecond, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	group := filepath.Join(home, journal.PaceGroupName)
	time.Sleep(20 * time.Millisecond) // dd has spent its millisecond and waits for the next period
	if err := writer.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := e.End(); err != nil {
		t.Fatalf("End beside a killed thread: %v", err)
	}
	if _, err := os.Stat(group); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the pace group %s is left after End: %v", group, err)
	}
	if p := j.Pending(); len(p) != 0 {
		t.Errorf("pending journal records after End: %v", p)
	}
}

// A pace left behind by a crash (no End) is undone by the next start's
// Recover: the threads go back, the group is removed.
func TestRecoverUndoesAPaceGroupACrashLeft(t *testing.T) {
	c, writer, home, p := dirtyingWriter(t, paceable(t), 1024)
	// Named, not sampled: under the VMs' emulated CPU the writer can
	// dirty nothing within the sampling's 5 ms, and then has no group.
	p.Dirtiers = listedDirtiers{writer.Process.Pid}
	j := p.Journal
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := p.Pace(ctx, c.Path, 2*time.Millisecond, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	group := filepath.Join(home, journal.PaceGroupName)
	if _, err := os.Stat(group); err != nil {
		t.Fatal(err)
	}
	undone, err := j.Recover(context.Background())
	if err != nil || len(undone) == 0 {
		t.Fatalf("Recover = %v, %v: want the pace group undone", undone, err)
	}
	if _, err := os.Stat(group); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Recover left the pace group %s: %v", group, err)
	}
}

// On v2 the pacer records the cpu controller's enabling in the leaf's
// cgroup.subtree_control before it writes "+cpu". A crash on either side
// of that write leaves a threaded pace group; the next start's Recover
// removes it, leaves the controller as it was before memcgd, and counts
// one change undone, which the daemon logs.
func TestRecoverUndoesAPaceGroupCrashedAroundItsController(t *testing.T) {
	l := paceableV2(t)
	for _, tt := range []struct {
		name    string
		written bool // whether "+cpu" reached the file before the crash
	}{
		{"before the write", false},
		{"after the write", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := cgrouptest.New(t, l, 256<<20)
			sleeper := c.Start(t, "sleep", "3600")
			leaf := threadCgroup(t, l, sleeper.Process.Pid)
			ctl := filepath.Join(leaf, journal.FileSubtreeControl)
			if cur := must(os.ReadFile(ctl)); slices.Contains(strings.Fields(string(cur)), "cpu") {
				t.Fatalf("%s enables cpu already (%q): nothing to record", ctl, cur)
			}
			j := cgrouptest.Journal(t, l)
			group := filepath.Join(leaf, journal.PaceGroupName)
			// What Pacer.Pace does up to the crash.
			must(j.Record(must(journal.PaceGroupChange(leaf, journal.FileThreads))))
			if err := os.Mkdir(group, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = unix.Rmdir(group) })
			if err := os.WriteFile(filepath.Join(group, "cgroup.type"), []byte("threaded"), 0); err != nil {
				t.Fatal(err)
			}
			must(j.Record(must(journal.SubtreeCPUChange(leaf))))
			if tt.written {
				if err := os.WriteFile(ctl, []byte("+cpu"), 0); err != nil {
					t.Fatal(err)
				}
			}
			undone, err := j.Recover(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(undone) != 1 {
				t.Errorf("Recover undid %v: want one change, what the daemon logs as undone", undone)
			}
			if _, err := os.Stat(group); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Recover left the pace group %s: %v", group, err)
			}
			if cur := must(os.ReadFile(ctl)); slices.Contains(strings.Fields(string(cur)), "cpu") {
				t.Errorf("%s after Recover = %q: want cpu disabled, as before memcgd", ctl, cur)
			}
			if p := j.Pending(); len(p) != 0 {
				t.Errorf("pending journal records after Recover: %v", p)
			}
		})
	}
}

// tenantUID is the user the tests' tenants run as (nobody).
const tenantUID = 65534

// asTenant runs name with args as the tenant user.
func asTenant(t *testing.T, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: tenantUID, Gid: tenantUID}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the tenant's %s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

// delegate gives dir, a cpu cgroup (v1) or a leaf (v2), to the tenant
// user, as a runtime that delegates a subtree does (chown of the
// directory), and has the tenant make a cgroup named as the pace group in
// it; the test removes it at its end.
func delegate(t *testing.T, dir string) string {
	t.Helper()
	if err := os.Chown(dir, tenantUID, tenantUID); err != nil {
		t.Fatal(err)
	}
	made := filepath.Join(dir, journal.PaceGroupName)
	asTenant(t, "mkdir", made)
	t.Cleanup(func() {
		if err := os.Remove(made); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cleanup: %v", err)
		}
	})
	return made
}

// pacerFiles are the files of a cgroup that the pacer writes when it
// takes the cgroup for its group: where threads go, and what it sets
// first (v1 the quota, v2 the type).
func pacerFiles(l layout.Layout) (threads, state string) {
	if l.CPU == nil {
		return journal.FileThreads, "cgroup.type"
	}
	return journal.FileTasksV1, "cpu.cfs_quota_us"
}

// sameState reports whether got, a cgroup's state file (pacerFiles) as
// read after the pacer ran, is as was, read before: on v2 the type is
// the kernel's to change between "domain", "domain invalid" and "domain
// threaded" as the cgroups around it come and go, and only "threaded" is
// what the pacer would write.
func sameState(l layout.Layout, was, got string) bool {
	if l.CPU == nil {
		return (was == "threaded") == (got == "threaded")
	}
	return was == got
}

// moveThread writes tid into dir's thread list, as its tenant may.
func moveThread(t *testing.T, l layout.Layout, dir string, tid int) {
	t.Helper()
	threads, _ := pacerFiles(l)
	if err := ctlfile.Write(filepath.Join(dir, threads), strconv.Itoa(tid)); err != nil {
		t.Fatal(err)
	}
}

// A tenant that may make cgroups beside its threads (a delegated
// subtree) makes one named as memcgd's pace group: the pacer does not
// take it for its own, whose limit the tenant could then write, nor move
// threads in or out of it, nor remove it; it leaves nothing in the
// journal, and the cgroup is not paced (ErrNotPaceable: the freezer
// throttles it), whether the tenant's writer runs beside the group or in
// it.
func TestThePacerLeavesATenantsGroupOfItsName(t *testing.T) {
	l := paceable(t)
	c, writer, home, p := dirtyingWriter(t, l, 100000)
	p.Dirtiers = listedDirtiers{writer.Process.Pid}
	squat := delegate(t, home)
	_, state := pacerFiles(l)
	for _, tt := range []struct {
		name string
		in   string // the writer's cpu cgroup
	}{
		{"beside it", home},
		{"in it", squat},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.in == squat && l.CPU == nil {
				// A v2 thread joins a child of its leaf only if the
				// child is threaded, as the tenant may make it.
				if err := ctlfile.Write(filepath.Join(squat, "cgroup.type"), "threaded"); err != nil {
					t.Fatal(err)
				}
			}
			moveThread(t, l, tt.in, writer.Process.Pid)
			was := must(ctlfile.Read(filepath.Join(squat, state)))
			e, err := p.Pace(t.Context(), c.Path, 2*time.Millisecond, 10*time.Millisecond)
			if err == nil {
				e.End()
				t.Fatal("Pace paced the writer through its tenant's group")
			}
			if !errors.Is(err, act.ErrNotPaceable) || !strings.Contains(err.Error(), squat) {
				t.Errorf("Pace: %v, want ErrNotPaceable naming %s", err, squat)
			}
			if got := threadCgroup(t, l, writer.Process.Pid); got != tt.in {
				t.Errorf("the writer is in %s, want %s where its tenant put it", got, tt.in)
			}
			var st unix.Stat_t
			if err := unix.Stat(squat, &st); err != nil || st.Uid != tenantUID {
				t.Errorf("the tenant's group: %v, uid %d, want it there and the tenant's", err, st.Uid)
			}
			if got := must(ctlfile.Read(filepath.Join(squat, state))); !sameState(l, was, got) {
				t.Errorf("the tenant's group's %s is %q, want %q as it was", state, got, was)
			}
			if pending := p.Journal.Pending(); len(pending) != 0 {
				t.Errorf("the journal holds %v, want nothing", pending)
			}
		})
	}
	moveThread(t, l, home, writer.Process.Pid)
}

// namedPacedWriter begins an episode of a dd writer that the pacer's
// dirtier source names, ended at the test's end, and returns the writer,
// the directory of its cpu cgroup, the episode and the pacer.
func namedPacedWriter(t *testing.T, l layout.Layout) (*exec.Cmd, string, host.Paced, *act.Pacer) {
	t.Helper()
	c, writer, home, p := dirtyingWriter(t, l, 100000)
	p.Dirtiers = listedDirtiers{writer.Process.Pid}
	e, err := p.Pace(t.Context(), c.Path, 2*time.Millisecond, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.End() })
	return writer, home, e, p
}

// A tenant that may make and remove cgroups beside its threads moves its
// writer out of the pace group mid-episode, removes the emptied group and
// makes its own of that name: the episode's writes, which go through the
// group it made, fail rather than reach the tenant's group; the next
// changes of the pace find no group of memcgd's to put the writer in
// (ErrNotPaceable: the freezer's), and End leaves the tenant's group as
// it is, with nothing left in the journal.
func TestThePacerWritesNothingToAGroupItsTenantSwapped(t *testing.T) {
	l := paceable(t)
	writer, home, e, p := namedPacedWriter(t, l)
	group := filepath.Join(home, journal.PaceGroupName)
	if got := threadCgroup(t, l, writer.Process.Pid); got != group {
		t.Fatalf("the writer is in %s, want %s", got, group)
	}
	// The tenant's moves: its thread back home, memcgd's group out, its
	// own in.
	moveThread(t, l, home, writer.Process.Pid)
	if err := os.Chown(home, tenantUID, tenantUID); err != nil {
		t.Fatal(err)
	}
	asTenant(t, "rmdir", group)
	squat := delegate(t, home)
	threads, state := pacerFiles(l)
	was := must(ctlfile.Read(filepath.Join(squat, state)))
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		err := e.Set(3*time.Millisecond, 10*time.Millisecond)
		if errors.Is(err, act.ErrNotPaceable) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("Set after the swap: %v, want ErrNotPaceable", err)
		}
	}
	if err := e.End(); err != nil {
		t.Errorf("End: %v", err)
	}
	if got := must(ctlfile.Read(filepath.Join(squat, state))); !sameState(l, was, got) {
		t.Errorf("the tenant's group's %s is %q, want %q as it was", state, got, was)
	}
	if tids := must(journal.ReadTIDs(filepath.Join(squat, threads))); len(tids) != 0 {
		t.Errorf("threads %v in the tenant's group, want none", tids)
	}
	if _, err := os.Stat(squat); err != nil {
		t.Errorf("End removed the tenant's group: %v", err)
	}
	if pending := p.Journal.Pending(); len(pending) != 0 {
		t.Errorf("the journal holds %v, want nothing", pending)
	}
}

// A tenant that may move its own threads (a delegated subtree) moves its
// writer out of the pace group: within liveRescan the episode counts it
// as unpaced (the backstop's cue) and puts it back in the group.
func TestThePacerTakesBackAThreadItsTenantMovedOut(t *testing.T) {
	l := paceable(t)
	writer, home, e, _ := namedPacedWriter(t, l)
	pe := e.(host.PacedEscapes)
	group := filepath.Join(home, journal.PaceGroupName)
	if n, ok := pe.Unpaced(); n != 0 || !ok {
		t.Fatalf("Unpaced = %d, %v while the writer is paced, want 0, true", n, ok)
	}
	moveThread(t, l, home, writer.Process.Pid)
	seen := false
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
		n, _ := pe.Unpaced()
		seen = seen || n == 1
		if seen && n == 0 && threadCgroup(t, l, writer.Process.Pid) == group {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("2 s after its tenant moved it out: counted unpaced %v, the writer in %s, want it back in %s",
				seen, threadCgroup(t, l, writer.Process.Pid), group)
		}
	}
}

// A thread id the dirtier source names that now belongs to a thread of
// another memory cgroup (the id reused once the dirtier exited) is not
// paced: the other cgroup's thread stays where it is and gets no group.
func TestThePacerPacesNoThreadOfAnotherCgroup(t *testing.T) {
	l := paceable(t)
	c, _, _, p := dirtyingWriter(t, l, 100000)
	other := cgrouptest.New(t, l, 0)
	sleeper := other.Start(t, "sleep", "3600")
	home := threadCgroup(t, l, sleeper.Process.Pid)
	p.Dirtiers = listedDirtiers{sleeper.Process.Pid}
	e, err := p.Pace(t.Context(), c.Path, 2*time.Millisecond, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer e.End()
	if got := threadCgroup(t, l, sleeper.Process.Pid); got != home {
		t.Errorf("the other cgroup's thread is in %s, want %s", got, home)
	}
	if _, err := os.Stat(filepath.Join(home, journal.PaceGroupName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a pace group beneath the other cgroup: %v", err)
	}
}

// The journal's undo of a pace group, at the next start after a crash,
// leaves a cgroup of that name that is not memcgd's: a tenant that
// removed the group memcgd had made (emptied) and made its own keeps it.
func TestRecoverLeavesATenantsPaceGroupOfItsName(t *testing.T) {
	l := paceable(t)
	c := cgrouptest.New(t, l, 0)
	home := l.Memory.Dir(c.Path)
	if l.CPU != nil {
		home = l.CPU.Dir(c.Path)
	}
	threads, _ := pacerFiles(l)
	j := cgrouptest.Journal(t, l)
	ch, err := journal.PaceGroupChange(home, threads)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Record(ch); err != nil {
		t.Fatal(err)
	}
	squat := delegate(t, home)
	undone, err := j.Recover(t.Context())
	if err != nil || len(undone) != 0 {
		t.Errorf("Recover = %v, %v: want nothing undone", undone, err)
	}
	if _, err := os.Stat(squat); err != nil {
		t.Errorf("Recover removed the tenant's group: %v", err)
	}
	if pending := j.Pending(); len(pending) != 0 {
		t.Errorf("the journal still holds %v", pending)
	}
}

// must returns v, failing the test on err.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// On v1 a pace group's bandwidth may not exceed its parent's
// (tg_cfs_schedulable_down), so the pace is held to the tenant's own CPU
// limit. The pacer reads that limit at most every second; a limit the
// tenant lowered since, which makes the kernel refuse the pace, is read
// again at once and the pace written within it.
func TestThePaceFollowsATenantLimitLoweredMidEpisode(t *testing.T) {
	l := paceable(t)
	if l.CPU == nil {
		t.Skip("v2's cpu.max takes a child's limit above its parent's (the least holds): no refusal to follow")
	}
	c, _, home, p := dirtyingWriter(t, l, 1024)
	write := func(file, v string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(home, file), []byte(v), 0); err != nil {
			t.Fatal(err)
		}
	}
	write("cpu.cfs_period_us", "100000")
	write("cpu.cfs_quota_us", "50000") // the tenant's own limit: half a CPU
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(home, "cpu.cfs_quota_us"), []byte("-1"), 0) })
	e, err := p.Pace(t.Context(), c.Path, 10*time.Millisecond, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer e.End()
	group := filepath.Join(home, journal.PaceGroupName)
	quota := func() string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(group, "cpu.cfs_quota_us"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	write("cpu.cfs_quota_us", "20000") // lowered to 0.2 CPU, above the pace's 0.1
	if err := e.Set(40*time.Millisecond, 100*time.Millisecond); err != nil {
		t.Fatalf("Set 0.4 of a CPU under a tenant limit lowered to 0.2: %v", err)
	}
	if got := quota(); got != "20000" {
		t.Errorf("pace group quota %s µs, want 20000: the tenant's lowered limit", got)
	}
	if err := e.Set(15*time.Millisecond, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := quota(); got != "15000" {
		t.Errorf("pace group quota %s µs, want 15000", got)
	}
}

// On v2 the pacer enables the cpu controller in the writer's leaf for
// its group. A tenant that may make cgroups there (a delegated subtree)
// makes one meanwhile, which then has the controller's files, and sets
// its CPU limit, or enables the controller further down: End leaves the
// controller enabled rather than take the tenant's limit away (or fail
// with EBUSY), removes the pace group and leaves nothing in the journal.
func TestThePacerLeavesTheCPUControllerATenantsCgroupUses(t *testing.T) {
	l := paceableV2(t)
	for _, tt := range []struct {
		name    string
		subtree bool // whether the tenant enables cpu beneath its cgroup
	}{
		{"its limit set", false},
		{"enabled further down", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			writer, home, e, p := namedPacedWriter(t, l)
			ctl := filepath.Join(home, journal.FileSubtreeControl)
			if len(p.Journal.Pending()) != 2 {
				t.Fatalf("journal %v: want the group's record and the +cpu's (the leaf enabled no cpu before)", p.Journal.Pending())
			}
			if err := os.Chown(home, tenantUID, tenantUID); err != nil {
				t.Fatal(err)
			}
			own := filepath.Join(home, "tenant")
			asTenant(t, "mkdir", own)
			t.Cleanup(func() {
				if err := os.Remove(own); err != nil && !errors.Is(err, os.ErrNotExist) {
					t.Errorf("cleanup: %v", err)
				}
			})
			asTenant(t, "sh", "-c", `echo threaded > "$0"/cgroup.type && echo "50000 100000" > "$0"/cpu.max`, own)
			if tt.subtree {
				asTenant(t, "sh", "-c", `echo +cpu > "$0"/cgroup.subtree_control`, own)
			}
			if err := e.End(); err != nil {
				t.Errorf("End: %v", err)
			}
			if got, err := ctlfile.Read(filepath.Join(own, "cpu.max")); got != "50000 100000" || err != nil {
				t.Errorf("the tenant's cpu.max after End: %q, %v, want %q as it set it", got, err, "50000 100000")
			}
			if cur := must(ctlfile.Read(ctl)); !slices.Contains(strings.Fields(cur), "cpu") {
				t.Errorf("%s after End = %q, want cpu enabled for the tenant's cgroup", ctl, cur)
			}
			if _, err := os.Stat(filepath.Join(home, journal.PaceGroupName)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("End left the pace group: %v", err)
			}
			if got := threadCgroup(t, l, writer.Process.Pid); got != home {
				t.Errorf("the writer is in %s after End, want %s", got, home)
			}
			if pending := p.Journal.Pending(); len(pending) != 0 {
				t.Errorf("the journal holds %v, want nothing", pending)
			}
		})
	}
}

// A group that stays populated at its episode's End (an exiting thread
// keeps it so until cgroup_exit; here a child cgroup the test makes) is
// left to remove later. An episode begun meanwhile on the same cgroup
// takes that group over with its journal record: the journal holds one
// record per file, so a new record would fail the episode, and removing
// the group later as the ended episode's would move the new episode's
// writer out. The new episode's End removes it and leaves nothing in the
// journal.
func TestThePacerTakesOverAGroupAnEndedEpisodeLeftBusy(t *testing.T) {
	l := paceable(t)
	c, writer, home, p := dirtyingWriter(t, l, 100000)
	p.Dirtiers = listedDirtiers{writer.Process.Pid}
	group := filepath.Join(home, journal.PaceGroupName)
	// Should the test fail with the group on the busy list, the group
	// would keep the test's cpu cgroup from being removed.
	t.Cleanup(func() { _ = unix.Rmdir(group) })
	pace := func() host.Paced {
		t.Helper()
		e, err := p.Pace(t.Context(), c.Path, 2*time.Millisecond, 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.End() })
		if got := threadCgroup(t, l, writer.Process.Pid); got != group {
			t.Fatalf("the writer is in %s, want %s", got, group)
		}
		return e
	}
	first := pace()
	hold := filepath.Join(group, "hold")
	if err := os.Mkdir(hold, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Rmdir(hold) })
	if err := first.End(); err != nil {
		t.Fatalf("End of a group left busy: %v", err)
	}
	if got := threadCgroup(t, l, writer.Process.Pid); got != home {
		t.Fatalf("the writer is in %s after End, want %s", got, home)
	}
	second := pace()
	if err := unix.Rmdir(hold); err != nil {
		t.Fatal(err)
	}
	p.Forget(host.Cgroup(path.Join(string(c.Path), "other"))) // removes the busy groups that emptied
	if got := threadCgroup(t, l, writer.Process.Pid); got != group {
		t.Errorf("the writer is in %s once the ended episode's group emptied, want %s, paced", got, group)
	}
	if err := second.End(); err != nil {
		t.Errorf("End: %v", err)
	}
	if _, err := os.Stat(group); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("End left the pace group: %v", err)
	}
	if pending := p.Journal.Pending(); len(pending) != 0 {
		t.Errorf("the journal holds %v, want nothing", pending)
	}
}

// On v2 a tenant that owns its leaf's cgroup.subtree_control (a
// delegated subtree) disables the cpu controller mid-episode, which the
// kernel allows and which takes the pace group's cpu.max away: the next
// change of the pace finds the limit gone, makes the group again under
// the controller enabled again, and the writer is paced; End leaves the
// controller disabled, as the tenant set it, and nothing in the journal.
func TestThePacerPacesAgainAfterItsTenantDisabledTheCPUController(t *testing.T) {
	l := paceableV2(t)
	writer, home, e, p := namedPacedWriter(t, l)
	group := filepath.Join(home, journal.PaceGroupName)
	ctl := filepath.Join(home, journal.FileSubtreeControl)
	for _, f := range []string{home, ctl} {
		if err := os.Chown(f, tenantUID, tenantUID); err != nil {
			t.Fatal(err)
		}
	}
	asTenant(t, "sh", "-c", `echo -cpu > "$0"`, ctl)
	if _, err := os.Stat(filepath.Join(group, "cpu.max")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the group's cpu.max after the tenant's -cpu: %v, want it gone (the test shows nothing)", err)
	}
	if err := e.Set(3*time.Millisecond, 10*time.Millisecond); err != nil {
		t.Fatalf("Set after the tenant's -cpu: %v", err)
	}
	if got, err := ctlfile.Read(filepath.Join(group, "cpu.max")); got != "3000 10000" || err != nil {
		t.Errorf("the group's cpu.max after Set: %q, %v, want %q", got, err, "3000 10000")
	}
	if got := threadCgroup(t, l, writer.Process.Pid); got != group {
		t.Errorf("the writer is in %s after Set, want %s", got, group)
	}
	if err := e.End(); err != nil {
		t.Errorf("End: %v", err)
	}
	if cur := must(ctlfile.Read(ctl)); slices.Contains(strings.Fields(cur), "cpu") {
		t.Errorf("%s after End = %q, want cpu disabled, as its tenant set it", ctl, cur)
	}
	if pending := p.Journal.Pending(); len(pending) != 0 {
		t.Errorf("the journal holds %v, want nothing", pending)
	}
}
