package daemon

import (
	"io"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/journal"
	"github.com/memcgd/memcgd/cgroupfs/layout"
)

// The load of the crash tests: a cgroup whose free space stays below
// low_wmark and whose dirty pages stay past the freerun ceiling, so that
// the daemon keeps changing state: on cgroup v1 it squeezes
// memory.limit_in_bytes to reclaim, and on both versions it freezes the
// cgroup (and its parent, whose thresholds its pages count against) to
// throttle the writer.
const (
	pressureLimit = 64 * mib
	// activeKnobs: low_wmark 20 MiB and high_wmark 24 MiB of the 64 MiB;
	// a freerun ceiling of 1.5 MiB, below the writer's 4 MiB bursts.
	activeKnobs = "dirty_background_bytes: 1M, dirty_bytes: 2M, min_free_kbytes: 16384, writeback_first: true"
	// passiveKnobs make a daemon that changes nothing stateful: no
	// reclaim, no throttle. It is the restart whose recovery is checked:
	// what it finds changed can only be left over from the run before.
	passiveKnobs = "dirty_background_bytes: 512M, dirty_bytes: 1G, min_free_kbytes: 0"
)

// pressure creates a parent cgroup and a child under load (startLoad),
// and returns both.
func pressure(t *testing.T, l layout.Layout) (parent, c *cgrouptest.Cgroup) {
	t.Helper()
	parent = cgrouptest.New(t, l, 0)
	c = parent.Child(t, "load")
	startLoad(t, l, c)
	return parent, c
}

// startLoad limits c to pressureLimit and puts it under the load above:
// two processes, a reader that cycles a file larger than the limit
// through the page cache, pausing 100 ms between passes, and a writer
// that dirties 4 MiB of a file every 100 ms. The reader keeps charging
// new pages, so the daemon's watch of c keeps firing.
func startLoad(t *testing.T, l layout.Layout, c *cgrouptest.Cgroup) {
	t.Helper()
	setLimit(t, l, c, pressureLimit)
	if !hasFreezer(l, c) {
		t.Fatalf("no freezer reaches %s: the daemon cannot throttle it, so a crash cannot leave it frozen", c.Path)
	}
	dir := diskDir(t)
	big := filepath.Join(dir, "big")
	uncachedFile(t, big, pressureLimit+32*mib)
	c.Start(t, "sh", "-c", `while :; do cat "$0" >/dev/null; sleep 0.1; done`, big)
	c.Start(t, "sh", "-c", `while :; do dd if=/dev/zero of="$0" bs=1M count=4 conv=notrunc 2>/dev/null; sleep 0.1; done`,
		filepath.Join(dir, "dirty"))
}

// uncachedFile writes size bytes to a new file at p, syncs it and drops
// it from the page cache, so that whoever reads it next is charged for
// its pages.
func uncachedFile(t *testing.T, p string, size int64) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.CopyN(f, zeros{}, size); err != nil {
		t.Fatalf("write %s: %v", p, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("sync %s: %v", p, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatalf("drop %s from the page cache: %v", p, err)
	}
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// undoState is what the daemon may change in the cgroups of a test and
// must put back: their memory limits and CPU limits as they were before
// it ran, and no pace group of its own left beneath them.
type undoState struct {
	l      layout.Layout
	cgs    []*cgrouptest.Cgroup
	limits []string
	cpu    []string // each cgroup's CPU limit, "" where it has none
}

func newUndoState(t *testing.T, l layout.Layout, cgs ...*cgrouptest.Cgroup) undoState {
	u := undoState{l: l, cgs: cgs}
	for _, c := range cgs {
		u.limits = append(u.limits, readLimit(t, l, c))
		u.cpu = append(u.cpu, readCPULimit(t, cpuLimitFile(l, c)))
	}
	return u
}

// changed lists what is not as it was: a limit or a CPU limit other than
// the original, a freezer that holds a cgroup frozen, a pace group
// (journal.PaceGroupName) beneath a cgroup, which holds its threads at a
// quota.
func (u undoState) changed(t *testing.T) []string {
	t.Helper()
	var out []string
	for i, c := range u.cgs {
		if got := readLimit(t, u.l, c); got != u.limits[i] {
			out = append(out, c.Dir+"/"+limitFile(u.l)+"="+got+" (was "+u.limits[i]+")")
		}
		if f := cpuLimitFile(u.l, c); f != "" {
			if got := readCPULimit(t, f); got != u.cpu[i] {
				out = append(out, f+"="+got+" (was "+u.cpu[i]+")")
			}
		}
		out = append(out, frozen(t, u.l, c)...)
		for _, dir := range []string{c.Dir, cpuDir(u.l, c)} {
			if dir == "" {
				continue
			}
			g := filepath.Join(dir, journal.PaceGroupName)
			if _, err := os.Stat(g); err == nil {
				out = append(out, g)
			}
		}
	}
	return out
}

// cpuDir is c's directory in the v1 cpu hierarchy, "" where there is none.
func cpuDir(l layout.Layout, c *cgrouptest.Cgroup) string {
	if l.CPU == nil {
		return ""
	}
	return l.CPU.Dir(c.Path)
}

// cpuLimitFile is the file that holds c's own CPU limit: cpu.max on v2,
// cpu.cfs_quota_us in the v1 cpu hierarchy; "" where c has neither.
func cpuLimitFile(l layout.Layout, c *cgrouptest.Cgroup) string {
	f := filepath.Join(c.Dir, "cpu.max")
	if dir := cpuDir(l, c); dir != "" && l.Memory.Version == layout.V1 {
		f = filepath.Join(dir, "cpu.cfs_quota_us")
	}
	if _, err := os.Stat(f); err != nil {
		return ""
	}
	return f
}

// readCPULimit reads the CPU limit file f, "" for none.
func readCPULimit(t *testing.T, f string) string {
	t.Helper()
	if f == "" {
		return ""
	}
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatalf("read %s: %v", f, err)
	}
	return strings.TrimSpace(string(b))
}

// short shortens control file paths for the log: each to its hierarchy's
// mount name and its path from the test's parent cgroup on, such as
// unified:memcgd-test-0123456789abcdef/load/cgroup.freeze.
func short(l layout.Layout, parent *cgrouptest.Cgroup, paths []string) string {
	base := path.Base(string(parent.Path))
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = p
		for _, h := range []*layout.Hierarchy{&l.Memory, l.Unified, l.Freezer, l.CPU} {
			if h == nil || !strings.HasPrefix(p, h.Mount+"/") {
				continue
			}
			if _, rest, ok := strings.Cut(p, "/"+base+"/"); ok {
				out[i] = path.Base(h.Mount) + ":" + base + "/" + rest
			}
		}
	}
	return strings.Join(out, " ")
}

// alive checks that the load's processes survived: a limit squeeze that
// went wrong would have OOM-killed them.
func alive(t *testing.T, c *cgrouptest.Cgroup) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.Dir, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(string(b))); n < 2 {
		t.Errorf("%s holds %d processes, want the reader's and the writer's (and their children)", c.Path, n)
	}
}

// crashIterations is how many times TestDaemonCrashSafety kills the
// daemon: $MEMCGD_CRASH_ITERATIONS, else 50, or 10 inside the VM, where
// each iteration takes about three seconds and the whole package must
// finish within test/vm's two minutes.
func crashIterations(t *testing.T) int {
	t.Helper()
	if s := os.Getenv("MEMCGD_CRASH_ITERATIONS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("MEMCGD_CRASH_ITERATIONS=%q: want a positive integer", s)
		}
		return n
	}
	if inTestVM() {
		return 10
	}
	return 50
}

// randomDelays returns a seeded source of kill moments: $MEMCGD_CRASH_SEED
// when set, to replay a failure, else the clock. The seed is logged.
func randomDelays(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("MEMCGD_CRASH_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("MEMCGD_CRASH_SEED=%q: want an unsigned integer", s)
		}
	}
	t.Logf("kill moments from seed %d (replay with MEMCGD_CRASH_SEED=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed))
}

// delay returns a moment in [10 ms, 1 s) after start-up, scaled for the
// VM.
func delay(r *rand.Rand) time.Duration {
	const lo, hi = 10 * time.Millisecond, time.Second
	return (lo + time.Duration(r.Int64N(int64(hi-lo)))) * slow()
}

// "A test kills the daemon with SIGKILL at random moments at least 50
// times while it reclaims and throttles; after each restart no cgroup
// keeps a changed limit or a frozen state." The restart runs a passive
// config, so that what it finds changed can only be the killed run's, and
// it must have undone that before it answers on its socket.
func TestDaemonCrashSafety(t *testing.T) {
	l := cgrouptest.Layout(t)
	n := crashIterations(t)
	r := randomDelays(t)
	parent, c := pressure(t, l)
	u := newUndoState(t, l, parent, c)
	d := newDaemon(t, managedConfig(parent.Path, activeKnobs))

	var pendingAtKill, squeezeAtKill, changedAtKill, undone int
	for i := range n {
		d.setConfig(managedConfig(parent.Path, activeKnobs))
		d.start()
		wait := delay(r)
		time.Sleep(wait)
		d.kill()
		// The journal and the cgroups as the crash left them.
		pending := journalPending(t, d.Journal)
		changed := u.changed(t)
		if len(pending) > 0 {
			pendingAtKill++
		}
		if slices.ContainsFunc(pending, func(p string) bool { return filepath.Base(p) == "memory.limit_in_bytes" }) {
			squeezeAtKill++
		}
		if len(changed) > 0 {
			changedAtKill++
		}

		logBefore := len(d.logText())
		d.setConfig(managedConfig(parent.Path, passiveKnobs))
		d.start()
		if still := u.changed(t); len(still) > 0 {
			t.Errorf("kill %d (%v after start): after the restart, still changed: %s", i+1, wait, short(l, parent, still))
		}
		if p := journalPending(t, d.Journal); len(p) > 0 {
			t.Errorf("kill %d: after the restart, the journal still has pending changes of %s", i+1, short(l, parent, p))
		}
		undone += strings.Count(d.logText()[logBefore:], "undid a change left by a previous run")
		t.Logf("kill %2d at %4dms: journal pending [%s]; changed [%s]", i+1, wait.Milliseconds(), short(l, parent, pending), short(l, parent, changed))
		d.stop()
	}
	alive(t, c)
	t.Logf("%d kills: %d with the journal holding a change in progress (%d of them a limit squeeze), "+
		"%d with a cgroup changed (limit lowered or frozen); the restarts undid %d changes",
		n, pendingAtKill, squeezeAtKill, changedAtKill, undone)
	if pendingAtKill == 0 {
		t.Errorf("none of %d kills found a change in progress in the journal: the test did not crash the daemon mid-change", n)
	}
	if changedAtKill > undone {
		t.Errorf("%d kills left a cgroup changed, but the restarts logged only %d undone changes", changedAtKill, undone)
	}
}

// SIGTERM undoes everything: the daemon exits with status 0, every limit
// back and every cgroup thawed, with no restart needed.
func TestDaemonUndoesOnSIGTERM(t *testing.T) {
	l := cgrouptest.Layout(t)
	r := randomDelays(t)
	parent, c := pressure(t, l)
	u := newUndoState(t, l, parent, c)
	d := newDaemon(t, managedConfig(parent.Path, activeKnobs))

	const n = 5
	var changedAtTerm int
	for i := range n {
		d.start()
		wait := delay(r)
		time.Sleep(wait)
		if len(u.changed(t)) > 0 {
			changedAtTerm++
		}
		d.signal(syscall.SIGTERM)
		if err := d.wait(readyTimeout); err != nil {
			t.Fatalf("SIGTERM %d (%v after start): memcgd exited with %v, want status 0", i+1, wait, err)
		}
		if still := u.changed(t); len(still) > 0 {
			t.Errorf("SIGTERM %d (%v after start): after exit, still changed: %s", i+1, wait, short(l, parent, still))
		}
		if p := journalPending(t, d.Journal); len(p) > 0 {
			t.Errorf("SIGTERM %d: after exit, the journal has pending changes of %s", i+1, short(l, parent, p))
		}
	}
	alive(t, c)
	t.Logf("%d SIGTERMs, %d of them while a cgroup was changed (limit lowered or frozen) just before", n, changedAtTerm)
	if !strings.Contains(d.logText(), "memcgd stopped") {
		t.Errorf("log lacks \"memcgd stopped\"")
	}
}
