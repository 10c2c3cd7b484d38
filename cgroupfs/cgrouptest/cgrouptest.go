// Package cgrouptest creates throw-away memory cgroups on the real kernel for
// tests, and runs processes inside them. Only tests import it.
//
// Every cgroup it makes is named memcgd-test-<random> and sits beneath the
// test process's own cgroup in each hierarchy it touches; t.Cleanup thaws
// it, kills its tasks and removes it, children first. Where and how is
// internal/sandbox's, which the experiments use too. It never writes to a
// cgroup it did not create, with one exception documented on New: on a v2
// host whose test process runs in the root cgroup (a test VM), it enables
// the memory and io controllers in the root's cgroup.subtree_control.
package cgrouptest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/internal/sandbox"
)

// procRoot is where the tests read their own cgroups.
const procRoot = "/proc"

// settle bounds how long Start and StartWriter wait for a child to get
// going.
const settle = sandbox.Settle

// Layout discovers the host's cgroup mounts. Without root or without a
// memory cgroup mount the test cannot run: it fails when CI=true, since CI
// must exercise the real kernel, and is skipped otherwise.
func Layout(t testing.TB) layout.Layout {
	t.Helper()
	if os.Geteuid() != 0 {
		unavailable(t, "real-kernel test needs root (euid %d)", os.Geteuid())
	}
	l, err := layout.Discover(procRoot)
	if err != nil {
		unavailable(t, "real-kernel test needs a memory cgroup mount: %v", err)
	}
	return l
}

func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// Cgroup is a memory cgroup a test created.
type Cgroup struct {
	// Path is the cgroup's path in the memory hierarchy.
	Path host.Cgroup
	// Dir is its directory in the memory hierarchy.
	Dir string

	layout layout.Layout
	// sb is the cgroup as internal/sandbox made it: its procs are the
	// directories whose cgroup.procs a started task joins, Dir and on a
	// hybrid host its mirrors at the same path.
	sb *sandbox.Cgroup
}

// New creates memcgd-test-<random> beneath the test process's own memory
// cgroup, with a limit of limit bytes unless limit is 0 (v1
// memory.limit_in_bytes, v2 memory.max).
//
// On a hybrid host (memory on v1) it also creates the cgroup at the same
// path in the unified hierarchy, for PSI and cgroup.freeze, and in the v1
// freezer and cpu hierarchies, each only when that path is beneath the test
// process's own cgroup in that hierarchy (sandbox.Create).
//
// On v2 the test process's cgroup must enable memory for its children: New
// enables it only where that cgroup is the root (a test VM), and is
// unavailable (skipped, or failed with CI=true) elsewhere (sandbox.New).
func New(t testing.TB, l layout.Layout, limit uint64) *Cgroup {
	t.Helper()
	sc, err := sandbox.New(l, "memcgd-test", sandbox.Options{Limit: limit, Mirror: true})
	return made(t, l, sc, err)
}

// Child creates a child cgroup of c called name, with no limit of its own.
// On v2 it enables memory (and io) in c's cgroup.subtree_control first,
// which the kernel allows only while c has no tasks: create children
// before starting anything in c.
func (c *Cgroup) Child(t testing.TB, name string) *Cgroup {
	t.Helper()
	sc, err := c.sb.Child(name, sandbox.Options{Mirror: true})
	return made(t, c.layout, sc, err)
}

// made registers the removal of what sandbox made, at cleanup, and fails
// the test on err, or skips it where the host has no memory controller to
// give the test.
func made(t testing.TB, l layout.Layout, sc *sandbox.Cgroup, err error) *Cgroup {
	t.Helper()
	if sc != nil {
		t.Cleanup(func() {
			if err := sc.Remove(); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
	}
	if errors.Is(err, sandbox.ErrNoMemoryController) || errors.Is(err, sandbox.ErrControllersOff) {
		unavailable(t, "test cgroup: %v", err)
	}
	if err != nil {
		t.Fatalf("test cgroup: %v", err)
	}
	return &Cgroup{Path: sc.Path, Dir: sc.Dir, layout: l, sb: sc}
}

// Start starts name with args inside the cgroup and returns it running. It
// returns once the process has joined the cgroup (and, on a hybrid host,
// the unified and freezer cgroups at the same path), before it runs name.
// The process's stdout is discarded and stderr kept for failure messages.
// At cleanup it is killed and waited for; a test that waits for it itself
// must do so from the test's goroutine before the test ends.
func (c *Cgroup) Start(t testing.TB, name string, args ...string) *exec.Cmd {
	t.Helper()
	return c.start(t, nil, name, args...)
}

// Output runs name with args inside the cgroup, waits for it and returns
// its standard output and error together.
func (c *Cgroup) Output(t testing.TB, name string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := c.startOut(t, &out, nil, name, args...)
	err := cmd.Wait()
	if b, ok := cmd.Stderr.(*bytes.Buffer); ok {
		out.Write(b.Bytes())
	}
	return out.String(), err
}

// start is Start with extra files for the command, from fd 4 on.
func (c *Cgroup) start(t testing.TB, extra []*os.File, name string, args ...string) *exec.Cmd {
	t.Helper()
	return c.startOut(t, nil, extra, name, args...)
}

// startOut is start with the command's stdout to stdout (nil discards
// it).
func (c *Cgroup) startOut(t testing.TB, stdout io.Writer, extra []*os.File, name string, args ...string) *exec.Cmd {
	t.Helper()
	ready, readyW, err := os.Pipe()
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	defer ready.Close()
	// The join reports on fd 3, the first of ExtraFiles, once inside.
	argv := sandbox.JoinArgv(c.sb.Procs(), 3, append([]string{name}, args...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = stdout
	cmd.ExtraFiles = append([]*os.File{readyW}, extra...)
	// A process group of its own, killed whole at cleanup: a shell
	// loop's dd, left running when only the shell is killed, kept
	// writing into the test's temporary directory while it was removed
	// ("directory not empty").
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	if err := awaitByte(ready, fmt.Sprintf("start %s: joining %s", name, c.Path)); err != nil {
		werr := cmd.Wait()
		t.Fatalf("%v (%v; stderr %q)", err, werr, stderr.String())
	}
	return cmd
}

// awaitByte waits for one byte on r: the signal that a child reached a
// point. EOF means it exited first.
func awaitByte(r *os.File, what string) error {
	if err := r.SetReadDeadline(time.Now().Add(settle)); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var b [1]byte
	if _, err := r.Read(b[:]); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// blockSize is the unit in which DirtyFile and StartWriter write; sizes
// are rounded up to it.
const blockSize = 4096

// DirtyFile writes size bytes of zeros (rounded up to 4 KiB) at the start
// of the file at path from a process inside c, without fsync, and returns
// once that process has exited: the pages stay dirty, charged to c, until
// the flusher writes them back (after dirty_expire_centisecs, 30 s by
// default, or sooner past the background threshold).
func DirtyFile(t testing.TB, c *Cgroup, path string, size int64) {
	t.Helper()
	cmd := c.Start(t, "dd", "if=/dev/zero", "of="+path, "bs="+strconv.Itoa(blockSize),
		"count="+strconv.FormatInt(blocks(size), 10), "conv=notrunc")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("dirty %s in %s: dd: %v (stderr %q)", path, c.Path, err, cmd.Stderr)
	}
}

func blocks(size int64) int64 { return (size + blockSize - 1) / blockSize }

// SyncFile writes the file at path back and waits for it (fsync(2)): its
// dirty pages are cleaned, and stay cached and charged where they were.
func SyncFile(t testing.TB, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync %s: %v", path, err)
	}
}

// writerScript truncates the file $0 on fd 5, writes $1 blocks to it, says
// so on fd 4 and sleeps with fd 5 still open for writing.
// Its block size is blockSize.
const writerScript = `exec 5>"$0" || exit 1; dd if=/dev/zero bs=4096 count="$1" >&5 2>/dev/null || exit 1; echo >&4; exec 4>&-; exec sleep 3600`

// StartWriter starts a process inside c that truncates the file at path,
// writes size bytes of zeros to it (rounded up to 4 KiB) without fsync and
// then sleeps holding the file open for writing, as a long-running writer
// does; /proc/PID/fd shows the file. It returns once the write is done.
// The process is killed at cleanup.
func StartWriter(t testing.TB, c *Cgroup, path string, size int64) *exec.Cmd {
	t.Helper()
	done, doneW, err := os.Pipe()
	if err != nil {
		t.Fatalf("writer %s: %v", path, err)
	}
	defer done.Close()
	cmd := c.start(t, []*os.File{doneW}, "sh", "-c", writerScript, path, strconv.FormatInt(blocks(size), 10))
	doneW.Close()
	if err := awaitByte(done, fmt.Sprintf("writer %s in %s", path, c.Path)); err != nil {
		_ = cmd.Process.Kill()
		werr := cmd.Wait()
		t.Fatalf("%v (%v; stderr %q)", err, werr, cmd.Stderr)
	}
	return cmd
}
