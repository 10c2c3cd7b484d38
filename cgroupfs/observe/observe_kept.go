package observe

import (
	"time"

	"golang.org/x/sys/unix"
)

// keptFiles keeps the control files a Reader reads open between reads, so
// that a cgroup looked at every millisecond (a throttled writer) costs a
// pread(2) per file rather than an open, a read and a close: each open
// walks the path through kernfs, revalidating every element, and was the
// largest share of a look (perf of the daemon in E1: openat 7.5 % of its
// CPU, at 11,600 opens a second). A kernfs control file regenerates its
// contents on a read at offset 0 (fs/seq_file.c, seq_read_iter), so a
// kept file reads as fresh as a new one.
//
// A kept file names its cgroup by the path it was opened at. A cgroup
// removed since fails the read (ENODEV: fs/kernfs/file.c,
// kernfs_fop_read_iter), and the path is opened afresh, finding a cgroup
// made at it since or none; so removal reads as with an open per read.
// A cgroup renamed away (v1 allows rename(2) within a parent) would still
// be read through the old file while another is made at its old path, so
// no file is kept longer than maxAge.
type keptFiles struct {
	files map[string]keptFile
}

type keptFile struct {
	fd     int
	opened time.Time
}

const (
	// maxOpenFiles bounds the files kept open by one Reader: five files
	// of each of a few cgroups looked at often. When it is reached every
	// kept file is closed; the busy ones are opened again at their next
	// read.
	maxOpenFiles = 32
	// maxAge is the longest a file is kept open.
	maxAge = time.Second
)

// get returns the kept file at path (NUL-terminated), if any and young
// enough; an old one is closed.
func (o *keptFiles) get(path []byte) (int, bool) {
	f, ok := o.files[string(path)]
	if !ok {
		return -1, false
	}
	if time.Since(f.opened) >= maxAge {
		o.drop(path)
		return -1, false
	}
	return f.fd, true
}

// put keeps fd open for path.
func (o *keptFiles) put(path []byte, fd int) {
	if o.files == nil {
		o.files = make(map[string]keptFile)
	}
	if len(o.files) >= maxOpenFiles {
		o.close()
	}
	o.files[string(path)] = keptFile{fd: fd, opened: time.Now()}
}

// drop closes the file kept for path.
func (o *keptFiles) drop(path []byte) {
	if f, ok := o.files[string(path)]; ok {
		unix.Close(f.fd)
		delete(o.files, string(path))
	}
}

// close closes every kept file.
func (o *keptFiles) close() {
	for p, f := range o.files {
		unix.Close(f.fd)
		delete(o.files, p)
	}
}
