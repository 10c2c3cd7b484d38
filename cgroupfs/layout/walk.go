package layout

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/host"
	"golang.org/x/sys/unix"
)

// Walk lists under and every cgroup beneath it in h, parents before
// children and siblings by name. Cgroups come and go while a walk runs: a
// directory that vanishes before it is listed is left out with its
// subtree. If under itself does not exist the error wraps host.ErrVanished.
func Walk(h Hierarchy, under host.Cgroup) ([]host.Cgroup, error) {
	var cgs []host.Cgroup
	err := walk(h, under, listChildren, func(cg host.Cgroup) error {
		cgs = append(cgs, cg)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return cgs, nil
}

// WalkFunc calls fn with each cgroup Walk would list, in the same order,
// as the walk finds it, so that a caller can read the first cgroups while
// the rest are found. An error from fn ends the walk and is returned.
func WalkFunc(h Hierarchy, under host.Cgroup, fn func(host.Cgroup) error) error {
	return walk(h, under, listChildren, fn)
}

// walk is WalkFunc with the directory lister as a parameter, so that a
// test can remove a directory between the listing of its parent and its
// own.
func walk(h Hierarchy, under host.Cgroup, list func(dir string, add func(name string, leaf bool)) error, fn func(host.Cgroup) error) error {
	top := h.Dir(under)
	if top == "" {
		return fmt.Errorf("walk %s: outside the mounted subtree %s of %s", under, h.Root, h.Mount)
	}
	if _, err := os.Stat(top); err != nil {
		if ctlfile.IsVanished(err) {
			return fmt.Errorf("walk %s: %w: %w", under, host.ErrVanished, err)
		}
		return fmt.Errorf("walk %s: %w", under, err)
	}
	type entry struct {
		cg   host.Cgroup
		leaf bool
	}
	stack := []entry{{cg: host.Cgroup(path.Clean(string(under)))}}
	for len(stack) > 0 {
		e := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if e.leaf {
			if err := fn(e.cg); err != nil {
				return err
			}
			continue
		}
		n := len(stack)
		err := list(h.Dir(e.cg), func(name string, leaf bool) {
			stack = append(stack, entry{cg: host.Cgroup(path.Join(string(e.cg), name)), leaf: leaf})
		})
		if ctlfile.IsVanished(err) {
			stack = stack[:n]
			continue
		}
		if err != nil {
			return fmt.Errorf("walk %s: %w", under, err)
		}
		if err := fn(e.cg); err != nil {
			return err
		}
		// Reversed, so that the first child by name is visited next.
		slices.Reverse(stack[n:])
	}
	return nil
}

// listChildren calls add with each child cgroup of the cgroup directory
// dir, by name, and whether it is a leaf. A cgroup directory's link count
// is 2 plus its child cgroups (fs/kernfs/inode.c kernfs_refresh_inode:
// subdirs + 2), so a stat of each child spares listing the ~30 control
// files of the leaves, most cgroups: the bulk of an idle daemon's scan.
// Each is stat'ed relative to dir, a walk of one path element. A child
// removed meanwhile is left out.
func listChildren(dir string, add func(name string, leaf bool)) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return err
	}
	slices.SortFunc(entries, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var statErr error
	err = rc.Control(func(fd uintptr) {
		var st unix.Stat_t
		for _, e := range entries {
			// A cgroup is a directory; everything else in cgroupfs is
			// a control file.
			if !e.IsDir() {
				continue
			}
			if err := unix.Fstatat(int(fd), e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if ctlfile.IsVanished(err) {
					continue
				}
				statErr = fmt.Errorf("stat %s/%s: %w", dir, e.Name(), err)
				return
			}
			add(e.Name(), st.Nlink == 2)
		}
	})
	if err != nil {
		return err
	}
	return statErr
}
