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
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs"
	"github.com/memcgd/memcgd/host"
)

// procRoot is where the tests read their own cgroups.
const procRoot = "/proc"

// settle bounds how long cleanup waits for killed tasks to leave a cgroup,
// and how long Start and StartWriter wait for a child to get going.
const settle = 10 * time.Second

// Layout discovers the host's cgroup mounts. Without root or without a
// memory cgroup mount the test cannot run: it fails when CI=true, since CI
// must exercise the real kernel, and is skipped otherwise.
func Layout(t testing.TB) cgroupfs.Layout {
	t.Helper()
	if os.Geteuid() != 0 {
		unavailable(t, "real-kernel test needs root (euid %d)", os.Geteuid())
	}
	l, err := cgroupfs.Discover(procRoot)
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

	layout cgroupfs.Layout
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
// and removed again.
//
// On v2 a child gets memory files only if its parent's
// cgroup.subtree_control enables memory. New enables memory (and io, when
// available) there only if the parent is the root cgroup, since any other
// cgroup holding the test process cannot enable controllers (the kernel's
// no-internal-process rule); otherwise it requires them enabled already.
// The root's controllers are left enabled at cleanup: other tests may be
// using them concurrently.
func New(t testing.TB, l cgroupfs.Layout, limit uint64) *Cgroup {
	t.Helper()
	self, err := cgroupfs.Self(procRoot, l)
	if err != nil {
		t.Fatalf("test cgroup: %v", err)
	}
	if l.Memory.Version == cgroupfs.V2 {
		dir := l.Memory.Dir(self)
		ok, err := enabled(dir, "memory")
		if err != nil {
			t.Fatalf("test cgroup: %v", err)
		}
		if !ok && self != "/" {
			unavailable(t, "test cgroup: the memory controller is not enabled in %s/cgroup.subtree_control, "+
				"and this process's cgroup %s is not the root, so it cannot enable it", dir, self)
		}
		if !ok {
			enableControllers(t, dir)
		}
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
	if c.layout.Memory.Version == cgroupfs.V2 {
		ok, err := enabled(c.Dir, "memory")
		if err != nil {
			t.Fatalf("child cgroup: %v", err)
		}
		if !ok {
			enableControllers(t, c.Dir)
		}
	}
	return create(t, c.layout, host.Cgroup(path.Join(string(c.Path), name)), 0)
}

// enabled reports whether dir's cgroup.subtree_control enables controller.
func enabled(dir, controller string) (bool, error) {
	p := filepath.Join(dir, "cgroup.subtree_control")
	b, err := os.ReadFile(p)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", p, err)
	}
	return slices.Contains(strings.Fields(string(b)), controller), nil
}

// enableControllers enables memory, and io when the cgroup has it, for the
// children of dir. Each is written alone: one unavailable controller fails
// the whole write.
func enableControllers(t testing.TB, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		t.Fatalf("test cgroup: %v", err)
	}
	have := strings.Fields(string(b))
	for _, c := range []string{"memory", "io"} {
		if !slices.Contains(have, c) {
			if c == "memory" {
				unavailable(t, "test cgroup: %s/cgroup.controllers lacks memory", dir)
			}
			continue
		}
		if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+"+c); err != nil {
			t.Fatalf("test cgroup: enable %s: %v", c, err)
		}
	}
}

// create makes the cgroup cg in the memory hierarchy and, on a hybrid
// host, at the same path in the unified and freezer hierarchies.
func create(t testing.TB, l cgroupfs.Layout, cg host.Cgroup, limit uint64) *Cgroup {
	t.Helper()
	c := &Cgroup{Path: cg, Dir: l.Memory.Dir(cg), layout: l}
	if c.Dir == "" {
		t.Fatalf("test cgroup %s: outside the mounted memory hierarchy %+v", cg, l.Memory)
	}
	// made are the cgroup's own directories, removed at cleanup; between
	// lie directories on the way to a mirror, which concurrent tests share.
	var made, between []string
	t.Cleanup(func() {
		c.remove(t, made)
		if err := removeBetween(between); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})

	if err := os.Mkdir(c.Dir, 0o755); err != nil {
		t.Fatalf("test cgroup: %v", err)
	}
	made = append(made, c.Dir)
	c.procs = append(c.procs, c.Dir)
	if limit != 0 {
		file := "memory.max"
		if l.Memory.Version == cgroupfs.V1 {
			file = "memory.limit_in_bytes"
		}
		if err := writeFile(filepath.Join(c.Dir, file), strconv.FormatUint(limit, 10)); err != nil {
			t.Fatalf("test cgroup: set limit: %v", err)
		}
	}
	if l.Memory.Version != cgroupfs.V1 {
		return c
	}
	mirrors := []struct {
		h    *cgroupfs.Hierarchy
		self func(string) (host.Cgroup, error)
	}{
		{l.Unified, cgroupfs.SelfUnified},
		{l.Freezer, cgroupfs.SelfFreezer},
	}
	for _, m := range mirrors {
		if m.h == nil {
			continue
		}
		own, err := m.self(procRoot)
		if err != nil {
			t.Fatalf("test cgroup: %v", err)
		}
		if !beneath(own, cg) {
			t.Logf("test cgroup %s: not beneath our own cgroup %s in %s; no mirror there", cg, own, m.h.Mount)
			continue
		}
		dirs, err := mkdirMirror(m.h.Dir(own), m.h.Dir(cg))
		between = append(between, dirs...)
		if err != nil {
			t.Fatalf("test cgroup: %v", err)
		}
		made = append(made, m.h.Dir(cg))
		c.procs = append(c.procs, m.h.Dir(cg))
	}
	return c
}

// beneath reports whether cg is a strict descendant of own.
func beneath(own, cg host.Cgroup) bool {
	if own == "/" {
		return cg != "/"
	}
	return strings.HasPrefix(string(cg), string(own)+"/")
}

// remove thaws the cgroup, kills its tasks and removes its directories.
func (c *Cgroup) remove(t testing.TB, made []string) {
	for _, d := range c.procs {
		// Frozen tasks cannot die. Best effort: a mirror may lack the file.
		_ = writeFile(filepath.Join(d, "freezer.state"), "THAWED")
		_ = writeFile(filepath.Join(d, "cgroup.freeze"), "0")
	}
	deadline := time.Now().Add(settle)
	for _, d := range c.procs {
		for {
			pids, err := procs(d)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("cleanup %s: %v", d, err)
			}
			if len(pids) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("cleanup %s: tasks %v still there after %v", d, pids, settle)
				break
			}
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, d := range made {
		for {
			err := os.Remove(d)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("cleanup: %v", err)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// procs lists the PIDs in dir/cgroup.procs.
func procs(dir string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%s/cgroup.procs: %q is not a PID", dir, f)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// writeFile writes s to an existing cgroupfs file in a single write(2), as
// the kernel expects.
func writeFile(p, s string) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", s, p, err)
	}
	return nil
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

// joinScript moves the shell into each directory's cgroup.procs given
// before "--", reports on fd 3 that it did, and executes the rest of its
// arguments with fd 3 closed.
const joinScript = `while [ "$1" != -- ]; do echo $$ > "$1/cgroup.procs" || exit 126; shift; done; shift; echo >&3; exec "$@" 3>&-`

// start is Start with extra files for the command, from fd 4 on.
func (c *Cgroup) start(t testing.TB, extra []*os.File, name string, args ...string) *exec.Cmd {
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
	cmd.ExtraFiles = append([]*os.File{readyW}, extra...)
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
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
