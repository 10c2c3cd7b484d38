package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/internal/sandbox"
)

// procRoot is where the lab reads its own cgroups.
const procRoot = "/proc"

// Options configure a Lab.
type Options struct {
	// Scratch is the directory in which the lab makes its own directory for
	// the experiment's files. It must be on a disk: page cache written
	// to tmpfs is never dirty nor written back.
	Scratch string
	// Revision names the source the binaries were built from, for
	// Describe; empty asks git.
	Revision string
}

// Lab is one experiment's bench: a parent cgroup beneath this process's
// own memory cgroup, the cgroups made beneath it, a scratch directory on
// disk, and whatever must be stopped or removed at the end. A Lab is used
// from one goroutine.
type Lab struct {
	// Layout is the host's cgroup mounts.
	Layout layout.Layout
	// Root is the experiment's parent cgroup, memcgd-exp-<random>, which
	// memcgd is told to manage: it touches nothing outside it.
	Root *Cgroup
	// Dir is the scratch directory on disk.
	Dir string

	revision string
	tmp      string    // temporary directory for binaries, sockets, journals
	cgroups  []*Cgroup // live cgroups, parents before children
	closers  []func() error
	// dirs are removed last, after the cgroups whose tasks may hold
	// files in them.
	dirs []string
}

// New creates a lab. It needs root, the memory controller (cgroup v1, or
// v2 with the memory controller available to this process's cgroup), and
// a scratch directory on disk. Close removes what New made, also when New
// fails half-way (New does that itself).
func New(o Options) (_ *Lab, err error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("lab: needs root (euid %d): it creates cgroups and drops caches", os.Geteuid())
	}
	lay, err := layout.Discover(procRoot)
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	if err := onDisk(o.Scratch); err != nil {
		return nil, err
	}
	l := &Lab{Layout: lay, revision: o.Revision}
	defer func() {
		if err != nil {
			err = errors.Join(err, l.Close())
		}
	}()
	if l.tmp, err = os.MkdirTemp("", "memcgd-exp-"); err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	l.dirs = append(l.dirs, l.tmp)
	if l.Dir, err = os.MkdirTemp(o.Scratch, "memcgd-exp-"); err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	l.dirs = append(l.dirs, l.Dir)

	sb, err := sandbox.New(lay, "memcgd-exp", sandbox.Options{Mirror: true})
	if l.Root, err = l.add(sb, err); err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	return l, nil
}

// onDisk checks that dir is on a filesystem with a backing device.
func onDisk(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("scratch directory: statfs %s: %w", dir, err)
	}
	switch st.Type {
	case unix.TMPFS_MAGIC, unix.RAMFS_MAGIC:
		return fmt.Errorf("scratch directory %s: is on a memory filesystem (type %#x): want a directory on a disk", dir, st.Type)
	}
	return nil
}

// Cgroup creates the cgroup name beneath parent (the Root when nil).
func (l *Lab) Cgroup(parent *Cgroup, name string, o CgroupOptions) (*Cgroup, error) {
	if parent == nil {
		parent = l.Root
	}
	return l.add(parent.sb.Child(name, o.options()))
}

// add keeps what sandbox made, or failed to make, for removal at Close.
func (l *Lab) add(sb *sandbox.Cgroup, err error) (*Cgroup, error) {
	c, err := newCgroup(l.Layout, sb, err)
	if c != nil {
		l.cgroups = append(l.cgroups, c)
	}
	return c, err
}

// Remove kills c's tasks and removes c; its children must be removed
// first.
func (l *Lab) Remove(c *Cgroup) error {
	i := slices.Index(l.cgroups, c)
	if i < 0 {
		return fmt.Errorf("remove %s: not a live cgroup of this lab", c.Path)
	}
	for _, d := range l.cgroups[i+1:] {
		if strings.HasPrefix(string(d.Path), string(c.Path)+"/") {
			return fmt.Errorf("remove %s: its child %s is still there", c.Path, d.Path)
		}
	}
	l.cgroups = slices.Delete(l.cgroups, i, i+1)
	return c.remove()
}

// OnClose registers f to run at Close, before the cgroups are removed and
// after the functions registered later.
func (l *Lab) OnClose(f func() error) { l.closers = append(l.closers, f) }

// Close runs the functions registered with OnClose, latest first, then
// removes every cgroup of the lab, children first, and the lab's
// directories. It reports every failure.
func (l *Lab) Close() error {
	var errs []error
	for i := len(l.closers) - 1; i >= 0; i-- {
		errs = append(errs, l.closers[i]())
	}
	for i := len(l.cgroups) - 1; i >= 0; i-- {
		if l.cgroups[i] == l.Root {
			// Its own children are gone: what is left beneath it, the
			// lab did not make.
			errs = append(errs, removeStray(l.Root))
		}
		errs = append(errs, l.cgroups[i].remove())
	}
	for _, d := range l.dirs {
		errs = append(errs, os.RemoveAll(d))
	}
	l.closers, l.cgroups, l.dirs = nil, nil, nil
	return errors.Join(errs...)
}

// File returns the path of a new file called name in the scratch
// directory.
func (l *Lab) File(name string) string { return filepath.Join(l.Dir, name) }

// Temp returns the path of name in the lab's temporary directory, which
// is removed at Close.
func (l *Lab) Temp(name string) string { return filepath.Join(l.tmp, name) }

// Build builds the main package pkg of this module (as "./cmd/memcgd")
// into the lab's temporary directory and returns the binary's path. It
// runs the go command from the module's root, found from the working
// directory.
func (l *Lab) Build(ctx context.Context, pkg string) (string, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("build %s: %w: put the Go toolchain on PATH", pkg, err)
	}
	out, err := exec.CommandContext(ctx, gobin, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("build %s: go env GOMOD: %w", pkg, err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("build %s: the working directory is not inside the memcgd module: run from its root", pkg)
	}
	bin := l.Temp(filepath.Base(pkg))
	cmd := exec.CommandContext(ctx, gobin, "build", "-o", bin, pkg)
	cmd.Dir = filepath.Dir(mod)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", pkg, err, stderr.String())
	}
	return bin, nil
}
