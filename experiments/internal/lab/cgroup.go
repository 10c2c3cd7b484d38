package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/memcgd/memcgd/cgroupfs"
	"github.com/memcgd/memcgd/host"
)

// settle bounds how long removal waits for killed tasks to leave a cgroup
// and for the kernel to let the directory go.
const settle = 10 * time.Second

// Cgroup is a memory cgroup the lab created.
type Cgroup struct {
	// Path is the cgroup's path in the memory hierarchy, as in
	// /proc/PID/cgroup.
	Path host.Cgroup
	// Dir is its directory in the memory hierarchy.
	Dir string
	// Unified is its mirror's directory in the unified hierarchy (PSI,
	// cgroup.freeze), "" when it has none.
	Unified string
	// Freezer is its mirror's directory in the v1 freezer hierarchy, ""
	// when it has none.
	Freezer string

	// limit is memory.limit_in_bytes as read back after creation: what
	// CheckUntouched expects to find after a daemon stopped.
	limit uint64
	// procs are the directories whose cgroup.procs a started task joins:
	// Dir and the mirrors.
	procs []string
	// made are the directories created for this cgroup; between are those
	// on the way to a mirror, shared under the cgrouptest protocol.
	made, between []string
}

// CgroupOptions say how to create a cgroup.
type CgroupOptions struct {
	// Limit is memory.limit_in_bytes; 0 leaves the cgroup unlimited.
	Limit uint64
	// Mirror also creates the cgroup at the same path in the unified and
	// freezer hierarchies, where they exist, so that its tasks have PSI
	// and can be frozen. Thousands of idle cgroups need none.
	Mirror bool
}

// newCgroup creates cg in the memory hierarchy and, with o.Mirror, its
// mirrors. On error the returned Cgroup holds what was made, for removal.
func newCgroup(l cgroupfs.Layout, cg host.Cgroup, o CgroupOptions) (*Cgroup, error) {
	c := &Cgroup{Path: cg, Dir: l.Memory.Dir(cg)}
	if c.Dir == "" {
		return nil, fmt.Errorf("cgroup %s: outside the mounted memory hierarchy %s", cg, l.Memory.Mount)
	}
	if err := os.Mkdir(c.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}
	c.made = append(c.made, c.Dir)
	c.procs = append(c.procs, c.Dir)
	if o.Limit != 0 {
		if err := writeFile(filepath.Join(c.Dir, "memory.limit_in_bytes"), strconv.FormatUint(o.Limit, 10)); err != nil {
			return c, fmt.Errorf("cgroup %s: set limit: %w", cg, err)
		}
	}
	lp := filepath.Join(c.Dir, "memory.limit_in_bytes")
	b, err := os.ReadFile(lp)
	if err != nil {
		return c, fmt.Errorf("cgroup %s: %w", cg, err)
	}
	if c.limit, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err != nil {
		return c, fmt.Errorf("cgroup %s: read %s: %w", cg, lp, err)
	}
	if !o.Mirror {
		return c, nil
	}
	mirrors := []struct {
		h    *cgroupfs.Hierarchy
		self func(string) (host.Cgroup, error)
		dir  *string
	}{
		{l.Unified, cgroupfs.SelfUnified, &c.Unified},
		{l.Freezer, cgroupfs.SelfFreezer, &c.Freezer},
	}
	for _, m := range mirrors {
		if m.h == nil {
			continue
		}
		own, err := m.self(procRoot)
		if err != nil {
			return c, fmt.Errorf("cgroup %s: %w", cg, err)
		}
		if !beneath(own, cg) {
			continue // not ours to create: no mirror there
		}
		dir := m.h.Dir(cg)
		dirs, err := mkdirMirror(m.h.Dir(own), dir)
		c.between = append(c.between, dirs...)
		if err != nil {
			return c, fmt.Errorf("cgroup %s: mirror in %s: %w", cg, m.h.Mount, err)
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

// child returns the path of c's child called name, which must be a single
// path element.
func (c *Cgroup) child(name string) (host.Cgroup, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\n") {
		return "", fmt.Errorf("child cgroup name %q: want a single path element", name)
	}
	return host.Cgroup(path.Join(string(c.Path), name)), nil
}

// joinScript moves the shell into each directory's cgroup.procs given
// before "--" and executes the rest of its arguments: the command runs as
// the same process, so its rusage is the command's.
const joinScript = `while [ "$1" != -- ]; do echo $$ > "$1/cgroup.procs" || exit 126; shift; done; shift; exec "$@"`

// Command returns a command that runs name with args inside c (and its
// mirrors), killed when ctx is done. Its stdout and stderr are the
// caller's to set.
func (c *Cgroup) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	sh := append([]string{"-c", joinScript, "sh"}, c.procs...)
	sh = append(append(sh, "--", name), args...)
	cmd := exec.CommandContext(ctx, "sh", sh...)
	cmd.WaitDelay = settle
	return cmd
}

// remove thaws the cgroup, kills its tasks and removes its directories,
// and then the directories on the way to its mirrors that nobody uses.
func (c *Cgroup) remove() error {
	var errs []error
	for _, d := range c.procs {
		// Frozen tasks cannot die. A mirror lacks one of the two files.
		_ = writeFile(filepath.Join(d, "freezer.state"), "THAWED")
		_ = writeFile(filepath.Join(d, "cgroup.freeze"), "0")
	}
	deadline := time.Now().Add(settle)
	for _, d := range c.procs {
		for {
			pids, err := procs(d)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
			if len(pids) == 0 {
				break
			}
			if time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("remove %s: tasks %v still there after %v", d, pids, settle))
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
	if len(c.between) > 0 {
		if err := removeBetween(c.between); err != nil {
			errs = append(errs, fmt.Errorf("remove mirror parents: %w", err))
		}
	}
	return errors.Join(errs...)
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

// writeFile writes s to an existing cgroupfs or procfs file in a single
// write(2), as the kernel expects.
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
