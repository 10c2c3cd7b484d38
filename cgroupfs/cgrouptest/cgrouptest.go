// Package cgrouptest creates throw-away memory cgroups on the real kernel for
// tests, and runs processes inside them. Only tests import it.
//
// Every cgroup it makes is named memcgd-test-<random> and sits beneath the
// test process's own cgroup in each hierarchy it touches; t.Cleanup thaws
// it, kills its tasks and removes it, children first. It never writes to a
// cgroup it did not create, with one exception documented on New: on a v2
// host whose test process runs in the root cgroup (a test VM), it enables
// the memory and io controllers in the root's cgroup.subtree_control.
package cgrouptest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
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
	// procs are the directories whose cgroup.procs a started task joins:
	// Dir, and on a hybrid host the unified and freezer cgroups at the
	// same path.
	procs []string
}

// New creates memcgd-test-<random> beneath the test process's own memory
// cgroup, with a limit of limit bytes unless limit is 0 (v1
// memory.limit_in_bytes, v2 memory.max).
//
// On a hybrid host (memory on v1) it also creates the cgroup at the same
// path in the unified hierarchy, for PSI and cgroup.freeze, and in the v1
// freezer hierarchy, each only when that path is beneath the test process's
// own cgroup in that hierarchy; missing directories on the way are created
// and removed again (internal/sandbox).
//
// On v2 a child gets memory files only if its parent's
// cgroup.subtree_control enables memory. New enables memory (and io, when
// available) there only if the parent is the root cgroup, since any other
// cgroup holding the test process cannot enable controllers (the kernel's
// no-internal-process rule); otherwise it requires them enabled already.
// The root's controllers are left enabled at cleanup: other tests may be
// using them concurrently.
func New(t testing.TB, l layout.Layout, limit uint64) *Cgroup {
	t.Helper()
	self, err := layout.Self(procRoot, l)
	if err != nil {
		t.Fatalf("test cgroup: %v", err)
	}
	if l.Memory.Version == layout.V2 {
		dir := l.Memory.Dir(self)
		ok, err := sandbox.Enabled(dir, "memory")
		if err != nil {
			t.Fatalf("test cgroup: %v", err)
		}
		if !ok && self != "/" {
			unavailable(t, "test cgroup: the memory controller is not enabled in %s/cgroup.subtree_control, "+
				"and this process's cgroup %s is not the root, so it cannot enable it", dir, self)
		}
		enableControllers(t, dir)
	}
	name := fmt.Sprintf("memcgd-test-%016x", rand.Uint64())
	return create(t, l, host.Cgroup(path.Join(string(self), name)), limit)
}

// Child creates a child cgroup of c called name, with no limit of its own.
// On v2 it enables memory (and io) in c's cgroup.subtree_control first,
// which the kernel allows only while c has no tasks: create children
// before starting anything in c.
func (c *Cgroup) Child(t testing.TB, name string) *Cgroup {
	t.Helper()
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\n") {
		t.Fatalf("child cgroup name %q: want a single path element", name)
	}
	if c.layout.Memory.Version == layout.V2 {
		enableControllers(t, c.Dir)
	}
	return create(t, c.layout, host.Cgroup(path.Join(string(c.Path), name)), 0)
}

// enableControllers enables memory, and io when available, for the
// children of the v2 cgroup at dir, unless memory is enabled already.
func enableControllers(t testing.TB, dir string) {
	t.Helper()
	err := sandbox.EnableControllers(dir)
	if errors.Is(err, sandbox.ErrNoMemoryController) {
		unavailable(t, "test cgroup: %v", err)
	}
	if err != nil {
		t.Fatalf("test cgroup: %v", err)
	}
}

// create makes the cgroup cg in the memory hierarchy and, on a hybrid
// host, at the same path in the unified and freezer hierarchies; cleanup
// removes them.
func create(t testing.TB, l layout.Layout, cg host.Cgroup, limit uint64) *Cgroup {
	t.Helper()
	sc, err := sandbox.Create(l, cg, sandbox.Options{Limit: limit, Mirror: true})
	if sc != nil {
		t.Cleanup(func() {
			if err := sc.Remove(); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatalf("test cgroup: %v", err)
	}
	return &Cgroup{Path: sc.Path, Dir: sc.Dir, layout: l, procs: sc.Procs()}
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

// joinScript moves the shell into each directory's cgroup.procs given
// before "--", reports on fd 3 that it did, and executes the rest of its
// arguments with fd 3 closed.
const joinScript = `while [ "$1" != -- ]; do echo $$ > "$1/cgroup.procs" || exit 126; shift; done; shift; echo >&3; exec "$@" 3>&-`

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
	shArgs := append([]string{"-c", joinScript, "sh"}, c.procs...)
	shArgs = append(append(shArgs, "--", name), args...)
	cmd := exec.Command("sh", shArgs...)
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
