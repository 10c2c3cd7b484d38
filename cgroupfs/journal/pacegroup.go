package journal

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/host"
	"golang.org/x/sys/unix"
)

// A pace group is a cgroup memcgd makes to hold a tenant's dirtying
// threads under a CPU bandwidth limit (cgroupfs/act's pacer): a directory
// named PaceGroupName beneath the cgroup the threads were in, in the v1
// cpu hierarchy, or a threaded child of the tenant's leaf on v2. Its
// record is made before the directory: Path is the group's thread list
// (FileTasksV1 or FileThreads), Cgroup the inode of the parent the
// threads came from, and its undo moves every thread still in the group
// back to that parent and removes the group. On v2 the pacer may also
// enable the cpu controller in the leaf's cgroup.subtree_control, once
// the group is threaded: that is a record of its own (Original "-cpu",
// Wrote "+cpu"), made after the group's and so undone first; its undo
// removes the group first.
const (
	PaceGroupName      = "memcgd.pace"
	FileTasksV1        = "tasks"
	FileThreads        = "cgroup.threads"
	FileSubtreeControl = "cgroup.subtree_control"
)

// PaceGroupChange is the record of a pace group made beneath parent, a
// cgroupfs directory, whose threads are listed in file (FileTasksV1 or
// FileThreads).
func PaceGroupChange(parent, file string) (Change, error) {
	ino, err := ctlfile.Ino(parent)
	if err != nil {
		return Change{}, err
	}
	return Change{Path: filepath.Join(parent, PaceGroupName, file), Original: "", Wrote: "pace", Cgroup: ino}, nil
}

// SubtreeCPUChange is the record of memcgd enabling the cpu controller in
// leaf's cgroup.subtree_control, for its pace group.
func SubtreeCPUChange(leaf string) (Change, error) {
	ino, err := ctlfile.Ino(leaf)
	if err != nil {
		return Change{}, err
	}
	return Change{Path: filepath.Join(leaf, FileSubtreeControl), Original: "-cpu", Wrote: "+cpu", Cgroup: ino}, nil
}

// ErrNotMemcgds reports a cgroup named PaceGroupName that memcgd did not
// make: a tenant that may make cgroups (a delegated subtree) can make one
// of that name, and it is the tenant's, to be left as it is.
var ErrNotMemcgds = errors.New("not a pace group of memcgd's")

// OwnedPaceGroup checks that the directory a pace group is at, held by
// dirfd, was made by memcgd: a cgroup belongs to the user who made it
// (kernel/cgroup/cgroup.c, cgroup_kn_set_ugid), and a tenant cannot make
// one of the daemon's user. It returns an error wrapping ErrNotMemcgds
// otherwise.
func OwnedPaceGroup(dirfd int, dir string) error {
	var st unix.Stat_t
	if err := unix.Fstat(dirfd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", dir, ctlfile.Vanished(err))
	}
	return owned(st, dir)
}

// OwnedDir is OwnedPaceGroup of the directory at dir, not followed if
// it is a symbolic link; one that does not exist is host.ErrVanished.
func OwnedDir(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("stat %s: %w", dir, ctlfile.Vanished(err))
	}
	return owned(st, dir)
}

// owned checks that st, the stat of dir, is of a directory that memcgd's
// user made.
func owned(st unix.Stat_t, dir string) error {
	if euid := os.Geteuid(); st.Uid != uint32(euid) || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%s belongs to uid %d, not memcgd's %d: %w", dir, st.Uid, euid, ErrNotMemcgds)
	}
	return nil
}

// undoPaceGroup moves every thread of c's pace group back to the parent
// it came from, and removes the group.
func undoPaceGroup(c Change) (wrote bool, why string, err error) {
	group := filepath.Dir(c.Path)
	parent := filepath.Dir(group)
	ino, err := ctlfile.Ino(parent)
	switch {
	case errors.Is(err, host.ErrVanished):
		return false, "cgroup gone", nil
	case err != nil:
		return false, "", err
	case ino != c.Cgroup:
		return false, fmt.Sprintf("cgroup removed and created again (inode %d, recorded %d)", ino, c.Cgroup), nil
	}
	if _, err := os.Stat(group); errors.Is(err, os.ErrNotExist) {
		return false, "", nil // never made, or removed already
	}
	moved, err := ReleasePaceGroup(group, filepath.Base(c.Path), ReleaseWait)
	switch {
	case errors.Is(err, ErrNotMemcgds):
		return false, "the cgroup of that name is not memcgd's: left as it is", nil
	case err != nil:
		return moved > 0, "", err
	}
	return true, "", nil
}

// ReleaseWait is how long ReleasePaceGroup retries the removal of a
// group that is still busy.
const ReleaseWait = 50 * time.Millisecond

// ReleasePaceGroup lifts the CPU limit of the pace group at dir, moves
// every thread of it (listed in file: FileTasksV1 or FileThreads) to its
// parent and removes dir. A thread that is exiting is not moved
// (kernel/cgroup/cgroup.c, cgroup_migrate_add_task skips PF_EXITING) and
// keeps the group populated until its exit reaches cgroup_exit: held by
// the quota, a killed thread could wait a whole period for the CPU to do
// so, hence the limit lifted first. It retries the removal for up to wait
// while threads still leave; one that takes longer leaves an error that
// wraps unix.EBUSY. A directory memcgd did not make is left as it is, with
// an error that wraps ErrNotMemcgds. It returns how many threads it moved.
func ReleasePaceGroup(dir, file string, wait time.Duration) (moved int, err error) {
	parent := filepath.Join(filepath.Dir(dir), file)
	switch err := OwnedDir(dir); {
	case errors.Is(err, host.ErrVanished):
		return 0, nil
	case err != nil:
		return 0, err
	}
	if err := liftLimit(dir, file); err != nil {
		return 0, err
	}
	for attempt := 0; ; attempt++ {
		tids, err := ReadTIDs(filepath.Join(dir, file))
		if errors.Is(err, host.ErrVanished) {
			return moved, nil
		}
		if err != nil {
			return moved, err
		}
		for _, tid := range tids {
			switch err := ctlfile.Write(parent, fmt.Sprint(tid)); {
			case err == nil:
				moved++
			case errors.Is(err, unix.ESRCH), errors.Is(err, host.ErrVanished):
			default:
				return moved, fmt.Errorf("move thread %d back to %s: %w", tid, parent, err)
			}
		}
		err = unix.Rmdir(dir)
		switch {
		case err == nil, errors.Is(err, unix.ENOENT):
			return moved, nil
		case errors.Is(err, unix.EBUSY) && time.Duration(attempt)*time.Millisecond < wait:
			time.Sleep(time.Millisecond)
		default:
			return moved, fmt.Errorf("remove %s: %w", dir, err)
		}
	}
}

// liftLimit sets the pace group at dir to no CPU limit: cpu.cfs_quota_us
// -1 on v1 (file FileTasksV1), cpu.max "max" on v2. A group already gone
// is no error.
func liftLimit(dir, file string) error {
	name, none := "cpu.max", "max"
	if file == FileTasksV1 {
		name, none = "cpu.cfs_quota_us", "-1"
	}
	err := ctlfile.Write(filepath.Join(dir, name), none)
	if err != nil && !errors.Is(err, host.ErrVanished) {
		return fmt.Errorf("lift the limit of %s: %w", dir, err)
	}
	return nil
}

// ReadTIDs reads a cgroup's thread list (tasks, cgroup.threads).
func ReadTIDs(p string) ([]int, error) {
	s, err := ctlfile.Read(p)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range strings.Fields(s) {
		var tid int
		if _, err := fmt.Sscan(f, &tid); err != nil {
			return nil, fmt.Errorf("read %s: thread id %q: %w", p, f, err)
		}
		out = append(out, tid)
	}
	return out, nil
}

// undoSubtreeControl disables the cpu controller memcgd enabled in a
// leaf's cgroup.subtree_control, if it is still enabled. Its record is
// newer than the pace group's, so Recover undoes it first, and the group
// that uses the controller must go before it: this removes the group
// then. A crash between the record and the write of "+cpu" leaves the
// group with the controller never enabled: that group is left to its own
// record, next, whose undo removes it and says so. Where the tenant has
// cgroups of its own beneath the leaf, the controller stays enabled and
// why says so.
func undoSubtreeControl(c Change) (wrote bool, why string, err error) {
	ino, err := ctlfile.FileIno(c.Path)
	switch {
	case errors.Is(err, host.ErrVanished):
		return false, "cgroup gone", nil
	case err != nil:
		return false, "", err
	case ino != c.Cgroup:
		return false, fmt.Sprintf("cgroup removed and created again (inode %d, recorded %d)", ino, c.Cgroup), nil
	}
	cur, err := ctlfile.Read(c.Path)
	if err != nil {
		return false, "", err
	}
	if !slices.Contains(strings.Fields(cur), "cpu") {
		return false, "", nil // never enabled, or disabled already
	}
	leaf := filepath.Dir(c.Path)
	if _, err := ReleasePaceGroup(filepath.Join(leaf, PaceGroupName), FileThreads, ReleaseWait); err != nil && !errors.Is(err, ErrNotMemcgds) {
		return false, "", err
	}
	// Any cgroup left beneath the leaf is its tenant's (a delegated
	// subtree), and has had the controller's files since "+cpu": "-cpu"
	// would take away what the tenant set in them, or fail with EBUSY
	// where the tenant enabled the controller further down
	// (kernel/cgroup/cgroup.c, cgroup_subtree_control_write). Enabled, the
	// controller limits nothing by itself, so it stays.
	switch others, err := childCgroups(leaf); {
	case errors.Is(err, host.ErrVanished):
		return false, "cgroup gone", nil
	case err != nil:
		return false, "", err
	case len(others) > 0:
		return false, fmt.Sprintf("the cpu controller stays enabled: the tenant's cgroups beneath (%s) have its files", others), nil
	}
	if err := ctlfile.Write(c.Path, c.Original); err != nil {
		return false, "", err
	}
	return true, "", nil
}

// childCgroups names up to three of the cgroups directly beneath dir,
// with ", ..." if there are more; "" if there are none.
func childCgroups(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("list %s: %w", dir, ctlfile.Vanished(err))
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if len(names) == 3 {
			names = append(names, "...")
			break
		}
		names = append(names, e.Name())
	}
	return strings.Join(names, ", "), nil
}

// UndoNow undoes pending change id at once, as Recover would, and marks
// it done: the pacer's own undo, at the end of an episode or of a
// failed start.
func (j *Journal) UndoNow(id uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	c, ok := j.pending[id]
	if !ok {
		return fmt.Errorf("journal %s: undo %d: no such pending change", j.path, id)
	}
	_, why, err := j.undo(c)
	if why != "" {
		slog.Info("journal: not undoing change", "change", c.String(), "reason", why)
	}
	if derr := j.done(id); err == nil {
		err = derr
	}
	return err
}
