// Package sandbox creates and removes cgroups beneath the calling process's
// own, in every hierarchy: the memory cgroup, and on a hybrid host (memory
// on v1) its mirrors at the same path in the unified hierarchy (PSI,
// cgroup.freeze), the v1 freezer and the v1 cpu hierarchy; and it starts
// commands inside them (JoinArgv). It is what the real-kernel tests
// (cgroupfs/cgrouptest) and the experiments (experiments/internal/lab)
// share: where they may create cgroups (New, Child) and how those are
// removed (Remove) is decided here only. It never writes to a cgroup it
// did not create, but for enabling controllers in a parent's
// cgroup.subtree_control on v2 (EnableControllers).
package sandbox

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
)

// ProcRoot is where the package reads the calling process's cgroups.
const ProcRoot = "/proc"

// Settle bounds how long Remove waits for killed tasks to leave a cgroup
// and for the kernel to let a removed cgroup's parent go.
const Settle = 10 * time.Second

// ErrNoMemoryController reports that a v2 cgroup cannot give its children
// the memory controller: its cgroup.controllers lacks it.
var ErrNoMemoryController = errors.New("memory controller not available")

// ErrControllersOff reports that the calling process's own v2 cgroup does
// not enable memory for its children and, holding the process, cannot
// (the kernel's no-internal-process rule).
var ErrControllersOff = errors.New("memory not enabled for the children of this process's cgroup")

// Options say how to create a cgroup.
type Options struct {
	// Limit is the memory limit in bytes (LimitFile); 0 leaves the cgroup
	// unlimited.
	Limit uint64
	// Mirror, on a hybrid host, also creates the cgroup at the same path
	// in the unified, freezer and cpu hierarchies, each only where that path
	// is beneath the calling process's own cgroup there, so that its
	// tasks have PSI and can be frozen. On v2 the cgroup is its own
	// mirror.
	Mirror bool
}

// Cgroup is a cgroup this package created.
type Cgroup struct {
	// Path is the cgroup's path in the memory hierarchy, as in
	// /proc/PID/cgroup.
	Path host.Cgroup
	// Dir is its directory in the memory hierarchy.
	Dir string
	// Unified is the directory with its PSI files and cgroup.freeze: Dir
	// on v2, the unified mirror on a hybrid host, "" when it has none.
	Unified string
	// Freezer is its mirror in the v1 freezer hierarchy, "" when none;
	// CPU its mirror in the v1 cpu hierarchy, where a pace group of its
	// tasks is made.
	Freezer, CPU string

	// layout is the host's cgroup mounts, for Child.
	layout layout.Layout
	// procs are the directories a task joins to be inside the cgroup in
	// every hierarchy: Dir and the mirrors.
	procs []string
	// made are the directories created for this cgroup; between are those
	// on the way to a mirror, shared under the lock-and-marker protocol
	// (between.go).
	made, between []string
}

// LimitFile is the memory limit's file on hierarchy version v:
// memory.limit_in_bytes on v1, memory.max on v2.
func LimitFile(v layout.Version) string {
	if v == layout.V1 {
		return "memory.limit_in_bytes"
	}
	return "memory.max"
}

// Procs returns the directories whose cgroup.procs a task must join to be
// inside c in every hierarchy: Dir first, then the mirrors.
func (c *Cgroup) Procs() []string { return slices.Clone(c.procs) }

// New creates prefix-<16 random hex digits> beneath the calling process's
// own memory cgroup, with the options o: the one place where the tests and
// the experiments may create cgroups, and what every other one they make
// lies beneath (Child).
//
// On v2 a child gets memory files only if its parent's
// cgroup.subtree_control enables memory. New enables memory (and io and
// cpu, where available) there only if the process's cgroup is the root (a
// test VM), since any other cgroup holding the process cannot enable
// controllers; otherwise it requires them enabled already, and fails with
// ErrControllersOff. The root's controllers are left enabled: other
// processes may be using them.
//
// On an error the returned Cgroup, when not nil, holds what was made: the
// caller removes it.
func New(l layout.Layout, prefix string, o Options) (*Cgroup, error) {
	self, err := layout.Self(ProcRoot, l)
	if err != nil {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}
	if l.Memory.Version == layout.V2 {
		dir := l.Memory.Dir(self)
		ok, err := Enabled(dir, "memory")
		if err != nil {
			return nil, fmt.Errorf("create cgroup: %w", err)
		}
		if !ok && self != "/" {
			return nil, fmt.Errorf("create cgroup: %s/cgroup.subtree_control lacks memory, and %s holds this process: %w", dir, self, ErrControllersOff)
		}
		if err := EnableControllers(dir); err != nil {
			return nil, fmt.Errorf("create cgroup: %w", err)
		}
	}
	return Create(l, host.Cgroup(path.Join(string(self), fmt.Sprintf("%s-%016x", prefix, rand.Uint64()))), o)
}

// Child creates c's child called name, a single path element, with the
// options o. On v2 it first enables memory (and io and cpu) in c's
// cgroup.subtree_control, which the kernel allows only while c holds no
// task: create children before starting anything in c.
func (c *Cgroup) Child(name string, o Options) (*Cgroup, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\n") {
		return nil, fmt.Errorf("child cgroup name %q: want a single path element", name)
	}
	if c.layout.Memory.Version == layout.V2 {
		if err := EnableControllers(c.Dir); err != nil {
			return nil, fmt.Errorf("create cgroup %s/%s: %w", c.Path, name, err)
		}
	}
	return Create(c.layout, host.Cgroup(path.Join(string(c.Path), name)), o)
}

// Create makes cg, which must lie beneath the calling process's own cgroup
// in the memory hierarchy, with the options o. On v2 its parent must
// enable memory for its children (EnableControllers). On an error the
// returned Cgroup, when not nil, holds what was made: the caller removes
// it. New and Child are the ways to call it; a test that makes a cgroup
// of its own shape (memory only, no mirrors) calls it itself.
func Create(l layout.Layout, cg host.Cgroup, o Options) (*Cgroup, error) {
	c := &Cgroup{Path: cg, Dir: l.Memory.Dir(cg), layout: l}
	if c.Dir == "" {
		return nil, fmt.Errorf("create cgroup %s: outside the mounted memory hierarchy %s", cg, l.Memory.Mount)
	}
	if err := os.Mkdir(c.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}
	c.made = append(c.made, c.Dir)
	c.procs = append(c.procs, c.Dir)
	if o.Limit != 0 {
		if err := WriteFile(filepath.Join(c.Dir, LimitFile(l.Memory.Version)), strconv.FormatUint(o.Limit, 10)); err != nil {
			return c, fmt.Errorf("create cgroup %s: set limit: %w", cg, err)
		}
	}
	if l.Memory.Version == layout.V2 {
		if o.Mirror {
			c.Unified = c.Dir
		}
		return c, nil
	}
	if !o.Mirror {
		return c, nil
	}
	mirrors := []struct {
		h    *layout.Hierarchy
		self func(string) (host.Cgroup, error)
		dir  *string
	}{
		{l.Unified, layout.SelfUnified, &c.Unified},
		{l.Freezer, layout.SelfFreezer, &c.Freezer},
		{l.CPU, layout.SelfCPU, &c.CPU},
	}
	for _, m := range mirrors {
		if m.h == nil {
			continue
		}
		own, err := m.self(ProcRoot)
		if err != nil {
			return c, fmt.Errorf("create cgroup %s: %w", cg, err)
		}
		if !beneath(own, cg) {
			continue // not ours to create: no mirror there
		}
		dir := m.h.Dir(cg)
		dirs, err := MkdirMirror(m.h.Dir(own), dir)
		c.between = append(c.between, dirs...)
		if err != nil {
			return c, fmt.Errorf("create cgroup %s: mirror in %s: %w", cg, m.h.Mount, err)
		}
		c.made = append(c.made, dir)
		c.procs = append(c.procs, dir)
		*m.dir = dir
	}
	return c, nil
}

// beneath reports whether cg is a strict descendant of own.
func beneath(own, cg host.Cgroup) bool {
	if own == "/" {
		return cg != "/"
	}
	return strings.HasPrefix(string(cg), string(own)+"/")
}

// Enabled reports whether the v2 cgroup at dir enables controller for its
// children (its cgroup.subtree_control lists it).
func Enabled(dir, controller string) (bool, error) {
	p := filepath.Join(dir, "cgroup.subtree_control")
	b, err := os.ReadFile(p)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", p, err)
	}
	return slices.Contains(strings.Fields(string(b)), controller), nil
}

// EnableControllers enables memory, and io and cpu when the cgroup has
// them (cpu for the pacer's pace groups), for the children of the v2
// cgroup at dir, unless memory is enabled already. The
// kernel allows it only in a cgroup without tasks, or in the root (the
// no-internal-process rule, kernel/cgroup/cgroup.c
// cgroup_vet_subtree_control_enable). Each controller is written alone:
// one unavailable controller fails the whole write. An error wraps
// ErrNoMemoryController when dir's cgroup.controllers lacks memory.
func EnableControllers(dir string) error {
	ok, err := Enabled(dir, "memory")
	if err != nil || ok {
		return err
	}
	p := filepath.Join(dir, "cgroup.controllers")
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	have := strings.Fields(string(b))
	if !slices.Contains(have, "memory") {
		return fmt.Errorf("%s lists %q: %w", p, have, ErrNoMemoryController)
	}
	for _, c := range []string{"memory", "io", "cpu"} {
		if !slices.Contains(have, c) {
			continue
		}
		if err := WriteFile(filepath.Join(dir, "cgroup.subtree_control"), "+"+c); err != nil {
			return fmt.Errorf("enable %s: %w", c, err)
		}
	}
	return nil
}

// Remove thaws the cgroup, kills its tasks and removes its directories,
// then the directories on the way to its mirrors that nobody uses any
// more. Its children must be gone. It reports every failure.
func (c *Cgroup) Remove() error {
	var errs []error
	for _, d := range c.procs {
		// Frozen tasks cannot die. A mirror lacks one of the two files.
		_ = WriteFile(filepath.Join(d, "freezer.state"), "THAWED")
		_ = WriteFile(filepath.Join(d, "cgroup.freeze"), "0")
	}
	deadline := time.Now().Add(Settle)
	for _, d := range c.procs {
		for {
			pids, err := Tasks(d)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
			if len(pids) == 0 {
				break
			}
			if time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("remove %s: tasks %v still there after %v", d, pids, Settle))
				break
			}
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for i := len(c.made) - 1; i >= 0; i-- {
		d := c.made[i]
		for {
			// A killed task leaves its cgroup a moment after it is gone
			// from cgroup.procs; until then rmdir fails with EBUSY.
			err := os.Remove(d)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("remove cgroup: %w", err))
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	c.made = nil
	if len(c.between) > 0 {
		if err := RemoveBetween(c.between); err != nil {
			errs = append(errs, fmt.Errorf("remove mirror parents: %w", err))
		}
		c.between = nil
	}
	return errors.Join(errs...)
}

// Tasks lists the PIDs in dir/cgroup.procs.
func Tasks(dir string) ([]int, error) {
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

// WriteFile writes s to an existing cgroupfs or procfs file in a single
// write(2), as the kernel expects.
func WriteFile(p, s string) error {
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
