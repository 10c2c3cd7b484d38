package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/test/daemon/internal/openwatch"
	"github.com/memcgd/memcgd/test/daemon/internal/tenant"
)

// The test binary is also the tenant: run with tenant.Env set, it runs a
// tenant load instead of the tests (see startTenant).
func init() {
	if load := os.Getenv(tenant.Env); load != "" {
		os.Exit(tenant.Main(load, os.Args[1:]))
	}
}

// The abuse test's load (issue 9, "Done when").
const (
	// abuseWindow is how long each tenant runs. They run one after the
	// other: a sync storm would write out the flipping tenant's dirty
	// pages before the daemon's write-out could.
	abuseWindow = 10 * time.Second
	// stormLimit and stormHeadroom: 63 MiB of the tenant's own under a
	// 64 MiB limit, as issue 9's reproduction of the sync storm.
	stormLimit    = 64 * mib
	stormHeadroom = 1 * mib
	stormPeriod   = 40 * time.Millisecond
	stormClean    = 4 * mib // read through now and then (tenant.StormOptions.Clean)
	// flipFiles files open for writing, appended to at flipRate.
	flipLimit = 256 * mib
	flipFiles = 32
	flipRate  = 4 * mib
	// abuseKnobs: write-out past 1 MiB of dirty pages, throttle past
	// 8.5 MiB, background reclaim below a low watermark of 2.5 MiB free,
	// which the storm's 1 MiB stays under.
	abuseKnobs = "dirty_background_bytes: 1M, dirty_bytes: 16M, min_free_kbytes: 2048, writeback_first: true"
	// maxFlushRate is issue 9's bound on full flushes, host-wide, over
	// the whole run and over any flushWindow of it.
	maxFlushRate = 1.0 // per second
	flushWindow  = 5 * time.Second
)

// oddCgroupNames are the names of the empty cgroups the test creates, as
// root, beneath the managed one: invalid UTF-8, spaces, quotes and a
// backslash, label injections, a tab, non-ASCII and a long name. The
// kernel refuses the one with a newline.
var oddCgroupNames = []string{
	"odd \xff\xfe invalid utf8",
	`odd "quoted" and \backslash`,
	`odd"} 1` + "\n" + `injected{cgroup="x`,
	`odd"} 1 injected{cgroup="x`,
	"odd\ttab",
	"odd ünïcödé",
	"odd " + strings.Repeat("long", 60),
}

// Tenants running as nobody inside managed cgroups do, for abuseWindow
// each, what issue 9 found a tenant can do to memcgd on 5e712c6:
//
//   - fd flipping: it holds files with odd names open for writing, appends
//     to them so that the daemon writes them out, and keeps dup2-ing over
//     their descriptors O_PATH descriptors of a root-only device node, of
//     a FIFO, and a socket (tenant.Flip);
//   - a sync storm under anon pressure: 63 MiB of anonymous memory under a
//     64 MiB limit, and one byte of a file rewritten every 40 ms
//     (tenant.Storm);
//   - odd names: its files', and, made by the test as root, those of
//     cgroups beneath the managed one.
//
// The daemon must open neither the device nor the FIFO (fanotify or
// inotify, whichever this kernel lets tell an O_PATH open from an open);
// make at most one full flush (sync or syncfs) per second (strace of the
// daemon, or its own flush counters where there is no strace); OOM-kill
// nothing; answer `memcgd get` and serve /metrics, odd names escaped or
// counted, during the load and after; and on SIGTERM exit 0 within a
// bound, every limit as it was and nothing frozen.
func TestAbuse(t *testing.T) {
	l := cgrouptest.Layout(t)
	bin := tenantBinary(t)
	share := sharedDir(t)

	// The device is a copy of /dev/null's node, root-only: the tenant
	// cannot open it, only hold the O_PATH descriptors the test gives it.
	dev, fifo := filepath.Join(share.root, "device"), filepath.Join(share.root, "fifo")
	if err := unix.Mknod(dev, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatalf("mknod %s: %v", dev, err)
	}
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatalf("mkfifo %s: %v", fifo, err)
	}
	watch := watchOpens(t, dev, fifo)
	devPath, fifoPath := openPath(t, dev), openPath(t, fifo)

	parent := cgrouptest.New(t, l, 0)
	storm := parent.Child(t, "storm")
	setLimit(t, l, storm, stormLimit)
	flip := parent.Child(t, "flip")
	setLimit(t, l, flip, flipLimit)
	odd := oddCgroups(t, l, parent)
	u := newUndoState(t, l, parent, storm, flip)
	oomBefore := map[string]uint64{"storm": oomKills(t, l, storm), "flip": oomKills(t, l, flip)}

	clean := filepath.Join(share.files, "clean")
	uncachedFile(t, clean, stormClean)
	if err := os.Chmod(clean, 0o644); err != nil {
		t.Fatal(err)
	}
	loopbackUp(t)

	d := newDaemon(t, managedConfig(parent.Path, abuseKnobs))
	d.start()
	t.Cleanup(func() {
		// A daemon that did not exit on SIGTERM is killed, so that the
		// cleanups after this one do not wait on it.
		if d.Running() {
			_ = d.Signal(syscall.SIGKILL)
			<-d.Exited()
		}
	})
	trace := traceSyncs(t, d)

	// The daemon must keep answering while the tenants run.
	wantCgroups := append([]host.Cgroup{parent.Path, storm.Path, flip.Path}, odd...)
	var probes probeLog
	began := time.Now()
	var tenants []*tenantProc
	var flipped map[string]uint64 // memcgd stat of flip after its tenant
	for _, start := range []func() *tenantProc{
		func() *tenantProc {
			return startTenant(t, l, flip, bin, []*os.File{devPath, fifoPath}, "flip",
				share.files, strconv.Itoa(flipFiles), strconv.Itoa(flipRate), abuseWindow.String())
		},
		func() *tenantProc {
			return startTenant(t, l, storm, bin, nil, "storm",
				filepath.Join(storm.Dir, usageFile(l)), strconv.Itoa(stormLimit), strconv.Itoa(stormHeadroom),
				filepath.Join(share.files, "storm"), stormPeriod.String(), clean, abuseWindow.String())
		},
	} {
		tp := start()
		tenants = append(tenants, tp)
		t.Logf("tenant %s (pid %d, uid %d) in %s: %s", tp.load, tp.cmd.Process.Pid, nobody.Uid, tp.cg.Path, tp.readyLine)
		var st map[string]uint64
		var dirtiest uint64 // the most dirty page cache the test saw in the tenant's cgroup
		for ran := time.Now(); time.Since(ran) < abuseWindow; {
			time.Sleep(time.Second)
			dirtiest = max(dirtiest, observe(t, l, tp.cg).Dirty)
			probes.add(fmt.Sprintf("%s %.0fs in", tp.load, time.Since(ran).Seconds()), d.answers(storm.Path, wantCgroups))
			if tp.load == "storm" && st == nil {
				if s, err := d.statTimed(storm.Path); err == nil && s["usage"] >= stormLimit-2*stormHeadroom {
					st = s
				}
			}
		}
		tp.wait(t, 10*time.Second*slow())
		if tp.load == "flip" {
			var err error
			if flipped, err = d.statTimed(flip.Path); err != nil {
				t.Errorf("after the flips: %v", err)
			}
			t.Logf("memcgd stat %s after the flips: writeout_targeted %d, writeout_flush %d (%d refused), throttle_pauses %d; the test saw up to %d KiB dirty",
				flip.Path, flipped["writeout_targeted"], flipped["writeout_flush"], flipped["writeout_flush_refused"], flipped["throttle_pauses"], dirtiest>>10)
		}
		if tp.load == "storm" {
			// Without this the flush count shows nothing: a daemon that
			// never looked at the storm made no flush for it.
			if st == nil {
				t.Errorf("memcgd stat %s: the daemon never reported the storm's usage above %d bytes (limit %d): "+
					"it missed the cgroup's wake-up, or its step never ended", storm.Path, stormLimit-2*stormHeadroom, stormLimit)
			} else {
				t.Logf("memcgd stat %s during the storm: usage %d, limit %d, low_wmark %d, dirty %d",
					storm.Path, st["usage"], st["limit"], st["low_wmark"], st["dirty"])
			}
		}
	}
	elapsed := time.Since(began)
	flushes := trace.stop(t, d)

	// After the load.
	probes.add("after the load", d.answers(storm.Path, wantCgroups))
	time.Sleep(settleEvents)
	opens, werr := watch.Opens()
	counters := d.countersAll(t)

	// SIGTERM: exit 0 within the bound, everything undone.
	exitBound := 5 * time.Second * slow()
	d.signal(syscall.SIGTERM)
	exitedIn, exitErr := d.waitBounded(exitBound)

	// Figures first, then the verdicts.
	t.Logf("load: %v; %d probes of `memcgd get` and /metrics, %d failed", elapsed.Round(time.Millisecond), probes.n, probes.failed)
	t.Logf("opens of the device or FIFO (%v events): %d %s", watch.Mode(), len(opens), summarizeOpens(opens, d.PID()))
	t.Logf("%s", flushes.figure)
	t.Logf("daemon counters over all its cgroups: writeout_targeted %d, writeout_flush %d (%d refused), throttle_pauses %d, pgoutrun %d, reclaimed_bytes %d",
		counters["writeout_targeted"], counters["writeout_flush"], counters["writeout_flush_refused"], counters["throttle_pauses"],
		counters["pgoutrun"], counters["reclaimed_bytes"])
	for _, tp := range tenants {
		t.Logf("tenant %s: %s", tp.load, tp.exitSummary())
	}

	if werr != nil {
		t.Errorf("the open watch broke: %v", werr)
	}
	// Without write-outs of the flipping tenant's files the count of
	// opens shows nothing: the daemon never reopened a slot. A refused
	// flush opens nothing.
	flipFlushes := flushCounters{asked: flipped["writeout_flush"], refused: flipped["writeout_flush_refused"]}.started()
	if flipped["writeout_targeted"]+flipFlushes == 0 {
		t.Errorf("memcgd stat %s: no write-out of the flipping tenant's files (writeout_targeted 0, writeout_flush %d, all refused): "+
			"the fd flips were never put to the daemon", flip.Path, flipped["writeout_flush"])
	}
	if len(opens) > 0 {
		t.Errorf("a tenant made another process open its device or FIFO %d times: %s (the daemon is pid %d)",
			len(opens), summarizeOpens(opens, d.PID()), d.PID())
	}
	// One more than the rate allows: a flush at each end of the count.
	if limit := maxFlushRate*flushes.span.Seconds() + 1; float64(flushes.total) > limit {
		t.Errorf("%d full flushes in %v, want at most %.0f (%.0f a second): %s",
			flushes.total, flushes.span.Round(time.Millisecond), limit, maxFlushRate, flushes.figure)
	}
	if limit := maxFlushRate*flushWindow.Seconds() + 1; flushes.timed && float64(flushes.worst) > limit {
		t.Errorf("%d full flushes within %v, want at most %.0f (%.0f a second): %s",
			flushes.worst, flushWindow, limit, maxFlushRate, flushes.figure)
	}
	for _, c := range []struct {
		name string
		cg   *cgrouptest.Cgroup
	}{{"storm", storm}, {"flip", flip}} {
		if n := oomKills(t, l, c.cg) - oomBefore[c.name]; n > 0 {
			t.Errorf("%s: %d OOM kills during the load, want none", c.cg.Path, n)
		}
	}
	for _, tp := range tenants {
		if tp.err != nil {
			t.Errorf("tenant %s: %s, want it to run its %v and exit 0", tp.load, tp.exitSummary(), abuseWindow)
		}
	}
	for _, f := range probes.failures() {
		t.Error(f)
	}
	switch {
	case exitedIn < 0:
		t.Errorf("memcgd did not exit within %v of SIGTERM; where its goroutines were:\n%s", exitBound, d.goroutines())
	case exitErr != nil:
		t.Errorf("memcgd exited %v after SIGTERM with %v, want status 0", exitedIn.Round(time.Millisecond), exitErr)
	default:
		t.Logf("memcgd exited 0 %v after SIGTERM", exitedIn.Round(time.Millisecond))
	}
	if still := u.changed(t); len(still) > 0 {
		t.Errorf("after SIGTERM, still changed: %s", short(l, parent, still))
	}
	if p := journalPending(t, d.Journal); len(p) > 0 {
		t.Errorf("after SIGTERM, the journal has pending changes of %s", short(l, parent, p))
	}
}

// tenantBinary returns a copy of the test binary that nobody can execute:
// the go tool builds it in a directory only root may enter.
func tenantBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "memcgd-abuse-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "tenant")
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		t.Fatalf("copy %s to %s: %v", self, bin, err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return bin
}

// shared is the test's directory on disk: root holds the device node and
// the FIFO, files is nobody's, for the tenants' files.
type shared struct{ root, files string }

// sharedDir makes the test's directory on a real disk (the tenants'
// dirty pages must be dirty in the writeback sense) that nobody can
// enter.
func sharedDir(t *testing.T) shared {
	t.Helper()
	root, err := os.MkdirTemp("", "memcgd-abuse-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == unix.TMPFS_MAGIC {
		t.Fatalf("%s is on tmpfs: set TMPDIR to a directory on a disk", root)
	}
	files := filepath.Join(root, "files")
	if err := os.Mkdir(files, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(files, int(nobody.Uid), int(nobody.Gid)); err != nil {
		t.Fatal(err)
	}
	return shared{root: root, files: files}
}

// watchOpens starts an openwatch of paths in the first mode that sees
// what it must: the test's own open of each, and nothing for an O_PATH
// open, which the tenant makes with the descriptors it is given. A kernel
// on which neither can tell the two apart fails the test rather than
// hiding opens.
func watchOpens(t *testing.T, paths ...string) *openwatch.Watch {
	t.Helper()
	var why []string
	for _, mode := range []openwatch.Mode{openwatch.Permission, openwatch.Inotify} {
		if err := calibrate(t, mode, paths); err != nil {
			t.Logf("cannot count opens with %v: %v", mode, err)
			why = append(why, err.Error())
			continue
		}
		// A fresh watch, which has not seen the calibration's opens.
		w, err := openwatch.New(mode, paths...)
		if err != nil {
			t.Fatalf("watch opens: %v", err)
		}
		t.Cleanup(func() { w.Close() })
		return w
	}
	t.Fatalf("no fanotify or inotify event counts the opens of %s here:\n%s", strings.Join(paths, " "), strings.Join(why, "\n"))
	return nil
}

// settleEvents is how long a queued fanotify event may take to be read.
const settleEvents = 200 * time.Millisecond

// calibrate checks that a watch of mode sees the test's own open of each
// path, and not its O_PATH open.
func calibrate(t *testing.T, mode openwatch.Mode, paths []string) error {
	t.Helper()
	w, err := openwatch.New(mode, paths...)
	if err != nil {
		return err
	}
	defer w.Close()
	for i, p := range paths {
		openPath(t, p).Close()
		time.Sleep(settleEvents)
		if got, _ := w.Opens(); len(got) != i {
			return fmt.Errorf("%v reports an O_PATH open of %s as an open (%+v)", mode, p, got)
		}
		f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NONBLOCK, 0)
		if err != nil {
			t.Fatalf("open %s: %v", p, err)
		}
		f.Close()
		var got []openwatch.Open
		poll(settleEvents, 5*time.Millisecond, func() bool {
			got, err = w.Opens()
			return len(got) > i
		})
		if err != nil {
			return err
		}
		if len(got) != i+1 || got[i].File != p || mode == openwatch.Permission && got[i].PID != os.Getpid() {
			return fmt.Errorf("%v: after the test opened %s, the watch saw %+v, want an open of it by pid %d", mode, p, got, os.Getpid())
		}
	}
	return nil
}

// openPath returns an O_PATH descriptor of p.
func openPath(t *testing.T, p string) *os.File {
	t.Helper()
	fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open %s with O_PATH: %v", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	t.Cleanup(func() { f.Close() })
	return f
}

// oddCgroups creates oddCgroupNames beneath parent, and tries a name with
// a newline, and returns the paths made.
func oddCgroups(t *testing.T, l layout.Layout, parent *cgrouptest.Cgroup) []host.Cgroup {
	t.Helper()
	var out []host.Cgroup
	for _, name := range oddCgroupNames {
		if strings.Contains(name, "\n") {
			// cgrouptest refuses such a name; the kernel does too
			// (kernel/cgroup/cgroup.c cgroup_mkdir), which is checked
			// here: a kernel that took it would need it tested.
			dir := filepath.Join(parent.Dir, name)
			if err := os.Mkdir(dir, 0o755); err == nil {
				os.Remove(dir)
				t.Errorf("the kernel made a cgroup named %q: a newline in a cgroup name needs testing", name)
			} else {
				t.Logf("cgroup name %q: %v", name, err)
			}
			continue
		}
		out = append(out, parent.Child(t, name).Path)
	}
	return out
}

// loopbackUp brings the loopback interface up inside the test VM, whose
// /init leaves it down, so that the daemon's metrics endpoint can be
// scraped there. (test/vm's init.sh is the better place for this.) On any
// other machine it does nothing.
func loopbackUp(t *testing.T) {
	t.Helper()
	if !inTestVM() {
		return
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("bring lo up: %v", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		t.Fatalf("bring lo up: SIOCGIFFLAGS: %v", err)
	}
	if ifr.Uint16()&unix.IFF_UP != 0 {
		return
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		t.Fatalf("bring lo up: SIOCSIFFLAGS: %v", err)
	}
	t.Logf("brought lo up: test/vm leaves it down")
}

// usageFile is the memory usage file of the controller's version.
func usageFile(l layout.Layout) string {
	if l.Memory.Version == layout.V1 {
		return "memory.usage_in_bytes"
	}
	return "memory.current"
}

// oomKills reads c's count of OOM kills: "oom_kill" of v1
// memory.oom_control or v2 memory.events (mm/memcontrol-v1.c
// mem_cgroup_oom_control_read, mm/memcontrol.c memory_events_show).
func oomKills(t *testing.T, l layout.Layout, c *cgrouptest.Cgroup) uint64 {
	t.Helper()
	file := "memory.events"
	if l.Memory.Version == layout.V1 {
		file = "memory.oom_control"
	}
	text := readFile(t, filepath.Join(c.Dir, file))
	for line := range strings.Lines(text) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "oom_kill "); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("%s/%s: %q", c.Dir, file, line)
			}
			return n
		}
	}
	t.Fatalf("%s/%s has no oom_kill line:\n%s", c.Dir, file, text)
	return 0
}

// tenantProc is a tenant process.
type tenantProc struct {
	load      string
	cg        *cgrouptest.Cgroup
	cmd       *exec.Cmd
	stderr    bytes.Buffer
	readyLine string
	exited    chan struct{}
	err       error // cmd.Wait's, once exited is closed
}

// startTenant runs the test binary as the tenant load with args, as
// nobody, in c (and on a hybrid host in the unified and freezer cgroups
// at c's path), with extra as its descriptors from tenant.DeviceFD on.
// The process starts as nobody and is moved into c by the test before it
// does anything; it returns once the tenant says its load runs.
func startTenant(t *testing.T, l layout.Layout, c *cgrouptest.Cgroup, bin string, extra []*os.File, load string, args ...string) *tenantProc {
	t.Helper()
	gate, gateW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer gateW.Close()
	tp := &tenantProc{load: load, cg: c, exited: make(chan struct{})}
	tp.cmd = exec.Command(bin, args...)
	tp.cmd.Dir = "/"
	tp.cmd.Env = append(os.Environ(), tenant.Env+"="+load)
	tp.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: nobody} // no supplementary groups
	tp.cmd.ExtraFiles = append([]*os.File{gate}, extra...)
	tp.cmd.Stderr = &tp.stderr
	// Not cmd.StdoutPipe, which Wait closes: the ready line must be read
	// even from a tenant that exits right after it.
	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	tp.cmd.Stdout = stdoutW
	err = tp.cmd.Start()
	gate.Close()
	stdoutW.Close()
	if err != nil {
		stdout.Close()
		t.Fatalf("start tenant %s: %v", load, err)
	}
	go func() {
		tp.err = tp.cmd.Wait()
		close(tp.exited)
	}()
	t.Cleanup(func() {
		tp.cmd.Process.Kill()
		<-tp.exited
	})

	pid := strconv.Itoa(tp.cmd.Process.Pid)
	dirs := []string{c.Dir}
	if l.Memory.Version == layout.V1 {
		for _, dir := range []func(host.Cgroup) (string, bool){l.UnifiedDir, l.FreezerDir} {
			if d, ok := dir(c.Path); ok {
				dirs = append(dirs, d)
			}
		}
	}
	for _, d := range dirs {
		writeFile(t, filepath.Join(d, "cgroup.procs"), pid)
	}
	if _, err := gateW.Write([]byte{1}); err != nil {
		t.Fatalf("start tenant %s: %v", load, err)
	}

	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if s, ok := strings.CutPrefix(sc.Text(), "ready "); ok {
				line <- s
				break
			}
		}
		io.Copy(io.Discard, stdout)
		stdout.Close()
	}()
	settle := 10 * time.Second * slow()
	select {
	case tp.readyLine = <-line:
	case <-tp.exited:
		t.Fatalf("tenant %s exited before its load ran: %v; stderr %q", load, tp.err, tp.stderr.String())
	case <-time.After(settle):
		t.Fatalf("tenant %s: not ready after %v; stderr %q", load, settle, tp.stderr.String())
	}
	return tp
}

// wait waits up to timeout for the tenant to end its load.
func (tp *tenantProc) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-tp.exited:
	case <-time.After(timeout):
		t.Errorf("tenant %s still running %v after its load should have ended", tp.load, timeout)
		tp.cmd.Process.Kill()
		<-tp.exited
	}
}

// exitSummary says how the tenant ended.
func (tp *tenantProc) exitSummary() string {
	select {
	case <-tp.exited:
	default:
		return "running"
	}
	s := "exit 0"
	if tp.err != nil {
		s = tp.err.Error()
	}
	if e := strings.TrimSpace(tp.stderr.String()); e != "" {
		s += "; stderr " + strconv.Quote(e)
	}
	return s
}

// probeLog collects the failures of the probes of the daemon, each
// distinct one once with the moments it happened.
type probeLog struct {
	n, failed int
	errs      []string            // distinct, in order of first sight
	when      map[string][]string // error to the moments it happened
}

func (p *probeLog) add(when string, errs []error) {
	p.n++
	if len(errs) > 0 {
		p.failed++
	}
	if p.when == nil {
		p.when = map[string][]string{}
	}
	for _, err := range errs {
		e := err.Error()
		if _, ok := p.when[e]; !ok {
			p.errs = append(p.errs, e)
		}
		p.when[e] = append(p.when[e], when)
	}
}

func (p *probeLog) failures() []string {
	var out []string
	for _, e := range p.errs {
		w := p.when[e]
		out = append(out, fmt.Sprintf("%d of %d probes (%s): %s", len(w), p.n, strings.Join(w, ", "), e))
	}
	return out
}

// summarizeOpens counts opens by file and opener.
func summarizeOpens(opens []openwatch.Open, daemon int) string {
	counts := map[string]int{}
	for _, o := range opens {
		who := fmt.Sprintf("pid %d (%s)", o.PID, o.Comm)
		switch o.PID {
		case daemon:
			who = "the daemon"
		case 0:
			who = "a process other than the tenant" // inotify does not say which
		}
		counts[filepath.Base(o.File)+" by "+who]++
	}
	var out []string
	for k, n := range counts {
		out = append(out, fmt.Sprintf("%d of %s", n, k))
	}
	slices.Sort(out)
	return "[" + strings.Join(out, ", ") + "]"
}

// answers checks that the daemon answers: `memcgd get cg` over the
// control socket, and a /metrics scrape that has every cgroup of want,
// those whose names are not UTF-8 escaped or counted.
func (d *daemon) answers(cg host.Cgroup, want []host.Cgroup) []error {
	var errs []error
	out, err := d.run("get", "--socket", d.Socket, "--json", string(cg))
	var s settings
	if err == nil {
		err = json.Unmarshal(out, &s)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("memcgd get %s: %w", cg, err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), answerTimeout*slow())
	defer cancel()
	if err := scrape(ctx, "http://"+d.Listen+"/metrics", want); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// scrape gets the metrics page at url and checks that it is served (200,
// UTF-8) and that a sample is labelled with each cgroup of want. A cgroup
// whose name is not UTF-8 cannot be a label value as it is: it counts as
// exported if a label stands for it (a cgroup label not among the UTF-8
// ones, with the same parent directory), or, if there is none, as counted
// if a metric whose name says so (invalid, skipped) is above zero.
func scrape(ctx context.Context, url string, want []host.Cgroup) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("scrape %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("scrape %s: %s: %s", url, resp.Status, tail(string(body), 5))
	}
	if !utf8.Valid(body) {
		return fmt.Errorf("scrape %s: the page is not UTF-8", url)
	}
	labels, counted := parseMetrics(body)
	var missing []string
	var invalid []host.Cgroup
	for _, cg := range want {
		switch {
		case !utf8.ValidString(string(cg)):
			invalid = append(invalid, cg)
		case !labels[string(cg)]:
			missing = append(missing, strconv.Quote(string(cg)))
		}
	}
	for _, cg := range invalid {
		escaped := false
		for l := range labels {
			if !slices.Contains(want, host.Cgroup(l)) && filepath.Dir(l) == filepath.Dir(string(cg)) {
				escaped = true
			}
		}
		if !escaped && counted == 0 {
			missing = append(missing, strconv.Quote(string(cg))+" (neither escaped nor counted)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("scrape %s: no samples of %s among %d cgroup labels", url, strings.Join(missing, ", "), len(labels))
	}
	return nil
}

// countedRE matches the names of metrics that count what could not be
// exported.
var countedRE = regexp.MustCompile(`(?i)(invalid|skip|unexport|bad|drop|escape)`)

// parseMetrics reads the Prometheus text format: the values of every
// "cgroup" label, and the sum of the samples of metrics matching
// countedRE.
func parseMetrics(body []byte) (labels map[string]bool, counted float64) {
	labels = map[string]bool{}
	for line := range strings.Lines(string(body)) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		name, _, _ := strings.Cut(f[0], "{")
		if countedRE.MatchString(name) {
			if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
				counted += v
			}
		}
		_, rest, _ := strings.Cut(line, "{")
		const key = `cgroup="`
		if i := strings.Index(rest, key); i == 0 || i > 0 && rest[i-1] == ',' {
			if v, ok := unescapeLabel(rest[i+len(key):]); ok {
				labels[v] = true
			}
		}
	}
	return labels, counted
}

// unescapeLabel reads a label value up to its closing quote, undoing the
// text format's escapes (\\, \", \n).
func unescapeLabel(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), true
		case '\\':
			if i+1 == len(s) {
				return "", false
			}
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			default:
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", false
}

// answerTimeout bounds each command and scrape of the daemon.
const answerTimeout = 5 * time.Second

// run runs the memcgd command line with args, within answerTimeout, and
// returns its standard output.
func (d *daemon) run(args ...string) ([]byte, error) {
	timeout := answerTimeout * slow()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.Bin, args...)
	cmd.Dir = "/"
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("memcgd %s: %w (within %v): %s", args[0], err, timeout, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// statReports runs `memcgd stat --json` against the daemon, of cg or,
// with cg "", of every cgroup.
func (d *daemon) statReports(cg host.Cgroup) ([]map[string]uint64, error) {
	args := []string{"stat", "--socket", d.Socket, "--json"}
	if cg != "" {
		args = append(args, string(cg))
	}
	out, err := d.run(args...)
	if err != nil {
		return nil, err
	}
	var reports []struct {
		Stats map[string]any `json:"stats"`
	}
	if err := decodeNumbers(out, &reports); err != nil {
		return nil, fmt.Errorf("memcgd stat: %w in %q", err, out)
	}
	var ms []map[string]uint64
	for _, r := range reports {
		m, err := statValues(r.Stats)
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// statTimed is `memcgd stat` of cg, within answerTimeout.
func (d *daemon) statTimed(cg host.Cgroup) (map[string]uint64, error) {
	ms, err := d.statReports(cg)
	if err != nil {
		return nil, err
	}
	if len(ms) != 1 {
		return nil, fmt.Errorf("memcgd stat %s: %d reports, want 1", cg, len(ms))
	}
	return ms[0], nil
}

// countersAll sums the daemon's counters over every cgroup it reports.
func (d *daemon) countersAll(t *testing.T) map[string]uint64 {
	t.Helper()
	reports, err := d.statReports("")
	if err != nil {
		t.Errorf("%v", err)
		return nil
	}
	sum := map[string]uint64{}
	for _, r := range reports {
		for k, v := range r {
			sum[k] += v
		}
	}
	return sum
}

// goroutines ends the daemon with SIGQUIT, which makes the Go runtime
// print every goroutine's stack to its log, and returns the goroutines'
// headers and memcgd's own frames from that dump.
func (d *daemon) goroutines() string {
	from := len(d.logText())
	_ = d.Signal(syscall.SIGQUIT)
	select {
	case <-d.Exited():
	case <-time.After(5 * time.Second):
		return "(no goroutine dump: memcgd ignored SIGQUIT)"
	}
	var b strings.Builder
	for line := range strings.Lines(d.logText()[from:]) {
		if strings.HasPrefix(line, "goroutine ") || strings.Contains(line, "github.com/memcgd/memcgd/") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// waitBounded waits up to timeout for the daemon to exit and returns its
// exit error and how long it took, or a negative duration if it did not
// exit.
func (d *daemon) waitBounded(timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	select {
	case <-d.Exited():
		return time.Since(start), d.ExitErr()
	case <-time.After(timeout):
		return -1, nil
	}
}

// syncTrace counts the daemon's full flushes: sync(2) and syncfs(2), with
// strace attached to all its threads. Without strace (the test VM) it
// falls back to the daemon's own counters: the flushes it asked the host
// for (writeout_flush) less those the host declined, rate-limited or with
// nothing to flush (writeout_flush_refused), which start no syncfs. That
// is at least the number of syncfs calls (a flush coalesced into one in
// progress is counted too), so the bound still catches a Flusher that
// lets a tenant drive full flushes faster than its rate.
type syncTrace struct {
	cmd    *exec.Cmd
	out    string
	stderr bytes.Buffer
	began  time.Time
	// base is the daemon's own count when the count began, without strace.
	base flushCounters
}

// flushCounters are the daemon's own flush counters over all its cgroups.
type flushCounters struct{ asked, refused uint64 }

// daemonFlushes reads d's flush counters.
func daemonFlushes(t *testing.T, d *daemon) flushCounters {
	t.Helper()
	c := d.countersAll(t)
	return flushCounters{asked: c["writeout_flush"], refused: c["writeout_flush_refused"]}
}

// started is how many of the flushes asked for were not refused.
func (c flushCounters) started() uint64 { return c.asked - min(c.refused, c.asked) }

// traceSyncs starts counting the flushes of the daemon d.
func traceSyncs(t *testing.T, d *daemon) *syncTrace {
	t.Helper()
	pid := d.PID()
	tr := &syncTrace{began: time.Now()}
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Logf("no strace (%v): full flushes are counted by the daemon's own writeout_flush less writeout_flush_refused", err)
		tr.base = daemonFlushes(t, d)
		return tr
	}
	tr.out = filepath.Join(t.TempDir(), "strace.out")
	tr.cmd = exec.Command(strace, "-f", "-ttt", "-e", "trace=sync,syncfs,fsync,fdatasync", "-e", "signal=none",
		"-o", tr.out, "-p", strconv.Itoa(pid))
	stderr, err := tr.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.cmd.Start(); err != nil {
		t.Fatalf("strace: %v", err)
	}
	t.Cleanup(func() {
		if tr.cmd.ProcessState == nil {
			tr.cmd.Process.Kill()
			tr.cmd.Wait()
		}
	})
	// strace says "Process PID attached" once it holds every thread.
	attached := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		said := false
		for sc.Scan() {
			tr.stderr.WriteString(sc.Text() + "\n")
			if !said && strings.Contains(sc.Text(), "attached") {
				said = true
				attached <- true
			}
		}
		if !said {
			attached <- false
		}
	}()
	select {
	case ok := <-attached:
		if !ok {
			t.Fatalf("strace -p %d: exited: %s", pid, tr.stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("strace -p %d: not attached after 10s", pid)
	}
	tr.began = time.Now()
	return tr
}

// straceCallRE matches an strace line that starts a call: "PID TIME
// name(", not a resumed one.
var straceCallRE = regexp.MustCompile(`^(?:\d+\s+)?(\d+\.\d+)\s+(\w+)\(`)

// flushCount is what a syncTrace counted.
type flushCount struct {
	total  int           // full flushes
	span   time.Duration // over this time
	timed  bool          // worst is known
	worst  int           // the most within any flushWindow
	figure string        // the figures, for the log
}

// stop ends the count.
func (tr *syncTrace) stop(t *testing.T, d *daemon) flushCount {
	t.Helper()
	c := flushCount{span: time.Since(tr.began)}
	if tr.cmd == nil {
		now := daemonFlushes(t, d)
		asked, refused := now.asked-tr.base.asked, now.refused-tr.base.refused
		c.total = int(now.started()) - int(tr.base.started())
		c.figure = fmt.Sprintf("full flushes by the daemon's own count (writeout_flush %d less writeout_flush_refused %d): %d in %v, %.1f a second",
			asked, refused, c.total, c.span.Round(time.Millisecond), float64(c.total)/c.span.Seconds())
		return c
	}
	// SIGINT detaches strace from the daemon, and ends it.
	tr.cmd.Process.Signal(syscall.SIGINT)
	tr.cmd.Wait()
	b, err := os.ReadFile(tr.out)
	if err != nil {
		t.Fatalf("strace: %v: %s", err, tr.stderr.String())
	}
	calls := map[string]int{}
	var at []float64 // when each full flush began, seconds
	for line := range strings.Lines(string(b)) {
		m := straceCallRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		calls[m[2]]++
		if m[2] == "sync" || m[2] == "syncfs" {
			sec, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				t.Fatalf("strace line %q: %v", line, err)
			}
			at = append(at, sec)
		}
	}
	c.total, c.timed = len(at), true
	for i := range at {
		j := i
		for j < len(at) && at[j]-at[i] < flushWindow.Seconds() {
			j++
		}
		c.worst = max(c.worst, j-i)
	}
	c.figure = fmt.Sprintf("strace of the daemon over %v: %d sync, %d syncfs (%.1f full flushes a second; at most %d within %v), %d fsync, %d fdatasync",
		c.span.Round(time.Millisecond), calls["sync"], calls["syncfs"], float64(c.total)/c.span.Seconds(), c.worst, flushWindow,
		calls["fsync"], calls["fdatasync"])
	return c
}
