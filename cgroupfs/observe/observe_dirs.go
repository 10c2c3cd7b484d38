package observe

import (
	"bytes"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"golang.org/x/sys/unix"
)

// parentDir keeps the directory that holds the cgroup a Reader last read
// open (as an O_PATH handle), so that the files of its siblings read next
// are opened relative to it: the kernel then walks two path elements, the
// cgroup's name and the file's, rather than every element from the root
// of the filesystem, each revalidated by kernfs (fs/kernfs/dir.c,
// kernfs_dop_revalidate).
//
// A parent that cannot be opened is remembered too, and so is one without
// child directories (a directory's link count is 2 plus its children:
// fs/kernfs/inode.c, kernfs_refresh_inode): on a hybrid host most v1
// cgroups have no unified mirror, and their PSI files then fail at once,
// without a system call each.
//
// A handle names the directory it was opened at. A parent removed and made
// again at the same path would hide the new one's children while the old
// handle is kept, so none is kept longer than maxAge.
type parentDir struct {
	path   []byte // NUL-terminated; empty when none is kept
	fd     int
	err    error // the open's, when it failed; ENOENT when it has no child
	opened time.Time
}

// open opens the NUL-terminated file path p, of a cgroup beneath the
// hierarchy mounted at a directory of mountLen bytes, for reading.
func (d *parentDir) open(p []byte, mountLen int) (int, error) {
	file := bytes.LastIndexByte(p, '/')
	cg := -1
	if file > 0 {
		cg = bytes.LastIndexByte(p[:file], '/')
	}
	if cg < mountLen {
		// A file of the hierarchy's root cgroup, whose parent is not
		// cgroupfs: open it whole.
		return ctlfile.OpenRead(p)
	}
	parent := p[:cg]
	if len(d.path) != len(parent)+1 || !bytes.Equal(d.path[:len(parent)], parent) || time.Since(d.opened) >= maxAge {
		d.close()
		d.path = append(append(d.path[:0], parent...), 0)
		d.fd, d.err = ctlfile.OpenDir(d.path)
		d.opened = time.Now()
		var st unix.Stat_t
		if d.err == nil && unix.Fstat(d.fd, &st) == nil && st.Nlink == 2 {
			unix.Close(d.fd)
			d.err = unix.ENOENT // no child, so not the one asked for
		}
	}
	if d.err != nil {
		return -1, d.err
	}
	return ctlfile.OpenReadAt(d.fd, p[cg+1:])
}

// close closes the handle kept, if any.
func (d *parentDir) close() {
	if len(d.path) > 0 && d.err == nil {
		unix.Close(d.fd)
	}
	d.path, d.err = d.path[:0], nil
}
