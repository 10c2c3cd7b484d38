package layout

import (
	"fmt"
	"os"
	"path"
	"syscall"

	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/host"
)

// Walk lists under and every cgroup beneath it in h, parents before
// children and siblings by name. Cgroups come and go while a walk runs: a
// directory that vanishes before it is listed is left out with its
// subtree. If under itself does not exist the error wraps host.ErrVanished.
func Walk(h Hierarchy, under host.Cgroup) ([]host.Cgroup, error) {
	return walk(h, under, os.ReadDir)
}

// walk is Walk with the directory reader as a parameter, so that a test can
// remove a directory between the listing of its parent and its own.
func walk(h Hierarchy, under host.Cgroup, readDir func(string) ([]os.DirEntry, error)) ([]host.Cgroup, error) {
	top := h.Dir(under)
	if top == "" {
		return nil, fmt.Errorf("walk %s: outside the mounted subtree %s of %s", under, h.Root, h.Mount)
	}
	if _, err := os.Stat(top); err != nil {
		if ctlfile.IsVanished(err) {
			return nil, fmt.Errorf("walk %s: %w: %w", under, host.ErrVanished, err)
		}
		return nil, fmt.Errorf("walk %s: %w", under, err)
	}
	var cgs []host.Cgroup
	stack := []host.Cgroup{host.Cgroup(path.Clean(string(under)))}
	for len(stack) > 0 {
		cg := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		dir := h.Dir(cg)
		// A cgroup directory's link count is 2 plus its child cgroups
		// (fs/kernfs/inode.c kernfs_refresh_inode: subdirs + 2). Most
		// cgroups are leaves: one stat spares reading ~30 entries of
		// control files, the bulk of an idle daemon's scan.
		var st syscall.Stat_t
		if err := syscall.Lstat(dir, &st); err != nil {
			if ctlfile.IsVanished(err) {
				continue
			}
			return nil, fmt.Errorf("walk %s: stat %s: %w", under, dir, err)
		}
		if st.Nlink == 2 {
			cgs = append(cgs, cg)
			continue
		}
		entries, err := readDir(dir)
		if ctlfile.IsVanished(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("walk %s: %w", under, err)
		}
		cgs = append(cgs, cg)
		// Push in reverse so that the first child by name is visited next.
		for i := len(entries) - 1; i >= 0; i-- {
			// A cgroup is a directory; everything else in cgroupfs is a
			// control file.
			if entries[i].IsDir() {
				stack = append(stack, host.Cgroup(path.Join(string(cg), entries[i].Name())))
			}
		}
	}
	return cgs, nil
}
