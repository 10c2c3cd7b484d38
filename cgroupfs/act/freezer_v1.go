package act

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/format"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
)

// A memory cgroup that exists only in the v1 memory hierarchy (a systemd
// service on a legacy host, a YARN container) has no freezer: its tasks
// sit in the freezer hierarchy's root, which cannot be frozen. EnsureFreezer
// does what container runtimes do (runc's fs.FreezerGroup): it creates the
// freezer cgroup at the same path and moves the tasks there. The v1 freezer
// controls nothing but freezing (kernel/cgroup/legacy_freezer.c), so a task
// in a THAWED freezer cgroup runs exactly as it did in the root.
//
// Only the v1 freezer hierarchy is touched, never the unified one: on a
// hybrid host systemd tracks its units by their unified cgroup, and moving
// a task there would take it from its unit.
//
// At exit the daemon leaves the freezer cgroups and the tasks in them,
// THAWED (the journal guarantees the thaw). Moving the tasks back would
// race with the tasks' own forks (a child forked during the move stays
// behind, in a cgroup the daemon then removes from under it) and with a
// manager that placed a task meanwhile; a THAWED freezer cgroup costs
// nothing. RemoveFreezer removes the empty directories a run created, once
// their memory cgroup is gone, and at exit (cgroupfs's FS.Close) every one
// left empty.

// ThrottleUnavailable says why a cgroup cannot be throttled: no freezer can
// hold its tasks. `memcgd stat` and the metrics show it as "throttle
// unavailable: <Reason>". It unwraps to errors.ErrUnsupported.
type ThrottleUnavailable struct {
	// Cgroup is the memory cgroup.
	Cgroup host.Cgroup
	// Reason says why, for an operator: what is missing or in the way.
	Reason string
}

// Error returns "throttle unavailable for CG: REASON".
func (e *ThrottleUnavailable) Error() string {
	return fmt.Sprintf("throttle unavailable for %s: %s", e.Cgroup, e.Reason)
}

// Unwrap returns errors.ErrUnsupported, what Pause reports when it finds no
// freezer.
func (e *ThrottleUnavailable) Unwrap() error { return errors.ErrUnsupported }

// FreezerMirror is what EnsureFreezer did for one memory cgroup.
type FreezerMirror struct {
	// Dir is the freezer cgroup at the memory cgroup's path: its
	// freezer.state stops the memory cgroup's tasks.
	Dir string
	// Made are the freezer directories this call created, outermost
	// first; RemoveFreezer takes them once the memory cgroup is gone.
	Made []string
	// Moved are the processes moved into the freezer hierarchy.
	Moved []int
}

// sweepRounds bounds how often EnsureFreezer looks again for tasks that
// forked while it moved their parents: a child forked before its parent
// moved stays where the parent was.
const sweepRounds = 3

// EnsureFreezer makes every task of the v1 memory cgroup cg, and of its
// descendants, freezable by the v1 freezer cgroup at cg's path: a task whose
// freezer cgroup is a strict ancestor of that path (the root, usually) is
// moved to the freezer cgroup at its own memory cgroup's path, which is
// created with its missing parents. Call it when cg has no cgroup.freeze,
// and again before each freeze: in the steady state it reads the
// cgroup.procs files of both subtrees and moves nothing.
//
// A task already in the freezer subtree at cg's path stays. A task that
// someone placed in another freezer cgroup also stays, and EnsureFreezer
// returns a *ThrottleUnavailable naming it, having moved nothing: freezing
// cg would not stop it. So does a missing freezer hierarchy. The calling
// process is never moved. A task that exits meanwhile is skipped.
//
// procRoot is where /proc/PID/cgroup is read.
func EnsureFreezer(l layout.Layout, procRoot string, cg host.Cgroup) (FreezerMirror, error) {
	var m FreezerMirror
	if err := layout.CheckPath(cg); err != nil {
		return m, fmt.Errorf("ensure freezer: %w", err)
	}
	unavailable := func(format string, args ...any) error {
		return &ThrottleUnavailable{Cgroup: cg, Reason: fmt.Sprintf(format, args...)}
	}
	if l.Memory.Version != layout.V1 {
		return m, fmt.Errorf("ensure freezer %s: the memory hierarchy is %s; only a v1 memory cgroup needs a v1 freezer", cg, l.Memory.Version)
	}
	if l.Freezer == nil {
		return m, unavailable("no cgroup.freeze at this path in a unified hierarchy, and no v1 freezer hierarchy is mounted")
	}
	if cg == "/" {
		return m, unavailable("the root cgroup cannot be frozen")
	}
	if path.Base(string(cg)) == AnchorName {
		return m, unavailable("its freezer cgroup would be memcgd's frozen anchor (%s), which would stop its tasks for good", AnchorName)
	}
	m.Dir = l.Freezer.Dir(cg)
	if m.Dir == "" {
		return m, unavailable("outside the mounted freezer subtree %s of %s", l.Freezer.Root, l.Freezer.Mount)
	}
	memDir := l.Memory.Dir(cg)
	self := os.Getpid()
	for range sweepRounds {
		moves, err := freezerMoves(l, procRoot, cg, memDir, self)
		if err != nil {
			return m, err
		}
		if len(moves) == 0 {
			return m, nil
		}
		for _, mv := range moves {
			made, err := mkdirFreezer(*l.Freezer, mv.to)
			m.Made = append(m.Made, made...)
			if err != nil {
				return m, fmt.Errorf("ensure freezer %s: %w", cg, err)
			}
			err = ctlfile.Write(filepath.Join(l.Freezer.Dir(mv.to), "cgroup.procs"), strconv.Itoa(mv.pid))
			if errors.Is(err, unix.ESRCH) {
				continue // exited meanwhile
			}
			if err != nil {
				return m, fmt.Errorf("ensure freezer %s: move task %d: %w", cg, mv.pid, err)
			}
			m.Moved = append(m.Moved, mv.pid)
		}
	}
	return m, nil
}

// freezerMove is a task to move to the freezer cgroup at path to.
type freezerMove struct {
	pid int
	to  host.Cgroup
}

// freezerMoves lists the moves that make cg's tasks freezable, or returns
// *ThrottleUnavailable when one of them sits in a foreign freezer cgroup.
// Only the tasks in the memory subtree and not in the freezer subtree are
// looked at one by one.
func freezerMoves(l layout.Layout, procRoot string, cg host.Cgroup, memDir string, self int) ([]freezerMove, error) {
	mem, err := subtreeProcs(memDir)
	if err != nil {
		return nil, fmt.Errorf("ensure freezer %s: %w", cg, err)
	}
	held := map[int]bool{}
	frzPids, err := subtreeProcs(l.Freezer.Dir(cg))
	if err != nil && !errors.Is(err, host.ErrVanished) {
		return nil, fmt.Errorf("ensure freezer %s: %w", cg, err)
	}
	for _, pid := range frzPids {
		held[pid] = true
	}
	var moves []freezerMove
	for _, pid := range mem {
		if held[pid] || pid == self {
			continue
		}
		memory, freezer, err := taskCgroups(procRoot, pid)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			continue // exited
		}
		if err != nil {
			return nil, fmt.Errorf("ensure freezer %s: %w", cg, err)
		}
		switch placeTask(cg, memory, freezer) {
		case taskMove:
			if path.Base(string(memory)) == AnchorName {
				return nil, &ThrottleUnavailable{Cgroup: cg, Reason: fmt.Sprintf(
					"task %d is in memory cgroup %s, whose freezer cgroup would be memcgd's frozen anchor, which would stop it for good", pid, memory)}
			}
			moves = append(moves, freezerMove{pid, memory})
		case taskForeign:
			return nil, &ThrottleUnavailable{Cgroup: cg, Reason: fmt.Sprintf(
				"task %d sits in freezer cgroup %s, which another manager chose; it is left there, and freezing %s would not stop it",
				pid, freezer, cg)}
		}
	}
	return moves, nil
}

// taskPlacement is what EnsureFreezer does with one task.
type taskPlacement int

const (
	// taskStays: the task is frozen with cg already, or has left cg.
	taskStays taskPlacement = iota
	// taskMove: the task is in an ancestor freezer cgroup; it moves to the
	// freezer cgroup at its memory cgroup's path.
	taskMove
	// taskForeign: the task is in a freezer cgroup outside cg's line;
	// someone placed it there.
	taskForeign
)

// placeTask decides for a task whose memory cgroup is memory and freezer
// cgroup is freezer, found in cg's memory subtree.
func placeTask(cg, memory, freezer host.Cgroup) taskPlacement {
	switch {
	case !layout.BeneathOrAt(cg, memory):
		return taskStays // moved out of cg since it was listed
	case layout.BeneathOrAt(cg, freezer):
		return taskStays // freezing cg stops it already
	case layout.BeneathOrAt(freezer, cg):
		return taskMove // an ancestor: moving down keeps whatever freezes the ancestor in force
	}
	return taskForeign
}

// taskCgroups reads a task's memory and freezer cgroups from
// procRoot/PID/cgroup in one read, so that both describe one moment.
func taskCgroups(procRoot string, pid int) (memory, freezer host.Cgroup, err error) {
	p := filepath.Join(procRoot, strconv.Itoa(pid), "cgroup")
	b, err := os.ReadFile(p)
	if err != nil {
		return "", "", fmt.Errorf("read %s: %w", p, err)
	}
	lines, err := format.ParseProcCgroup(b)
	if err != nil {
		return "", "", fmt.Errorf("read %s: %w", p, err)
	}
	for _, line := range lines {
		switch {
		case line.Has("memory"):
			memory = host.Cgroup(line.Path)
		case line.Has("freezer"):
			freezer = host.Cgroup(line.Path)
		}
	}
	if memory == "" || freezer == "" {
		return "", "", fmt.Errorf("read %s: want a memory and a freezer line", p)
	}
	return memory, freezer, nil
}

// mkdirFreezer creates the freezer cgroup at cg and its missing parents,
// walking down from the mount with openat(2) and O_NOFOLLOW, so that no
// symbolic link, wherever it was planted, takes the walk outside the
// hierarchy; the mount itself must be cgroupfs. It returns the directories
// it created, outermost first.
func mkdirFreezer(h layout.Hierarchy, cg host.Cgroup) ([]string, error) {
	rel, ok := layout.Within(h.Root, string(cg))
	if !ok {
		return nil, fmt.Errorf("mkdir freezer %s: outside the mounted subtree %s of %s", cg, h.Root, h.Mount)
	}
	fd, err := unix.Open(h.Mount, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("mkdir freezer %s: open %s: %w", cg, h.Mount, err)
	}
	defer func() { unix.Close(fd) }()
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		return nil, fmt.Errorf("mkdir freezer %s: statfs %s: %w", cg, h.Mount, err)
	}
	if st.Type != unix.CGROUP_SUPER_MAGIC {
		return nil, fmt.Errorf("mkdir freezer %s: %s is not a cgroup v1 mount (filesystem magic %#x); refusing to create", cg, h.Mount, st.Type)
	}
	if rel == "." {
		return nil, nil
	}
	var made []string
	dir := h.Mount
	for _, elem := range strings.Split(rel, "/") {
		dir = filepath.Join(dir, elem)
		err := unix.Mkdirat(fd, elem, 0o755)
		if err == nil {
			made = append(made, dir)
		} else if !errors.Is(err, unix.EEXIST) {
			return made, fmt.Errorf("mkdir %s: %w", dir, err)
		}
		next, err := unix.Openat(fd, elem, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return made, fmt.Errorf("open %s: %w", dir, err)
		}
		unix.Close(fd)
		fd = next
	}
	return made, nil
}

// RemoveFreezer removes, deepest first, the freezer directories that
// EnsureFreezer created (FreezerMirror.Made), once their memory cgroup is
// gone. The kernel refuses to remove a cgroup with tasks or children
// (EBUSY): such a directory, and so its parents, stay, which is no error.
// It refuses a path outside a cgroup v1 mount.
func RemoveFreezer(made []string) error {
	for i := len(made) - 1; i >= 0; i-- {
		d := made[i]
		var st unix.Statfs_t
		if err := unix.Statfs(d, &st); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return fmt.Errorf("remove freezer %s: %w", d, err)
		}
		if st.Type != unix.CGROUP_SUPER_MAGIC {
			return fmt.Errorf("remove freezer %s: not on a cgroup v1 mount (filesystem magic %#x); refusing", d, st.Type)
		}
		err := unix.Rmdir(d)
		switch {
		case err == nil, errors.Is(err, unix.ENOENT):
		case errors.Is(err, unix.EBUSY), errors.Is(err, unix.ENOTEMPTY):
			continue // in use: it and its parents stay
		default:
			return fmt.Errorf("remove freezer %s: %w", d, err)
		}
	}
	return nil
}
