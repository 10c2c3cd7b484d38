package act

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/format"
	"github.com/memcgd/memcgd/cgroupfs/safeio"
	"github.com/memcgd/memcgd/host"
)

// WriteOutFD starts write-out of the whole file pathFD names, a
// descriptor (opened with O_PATH, or otherwise) that WriteOutFD takes over
// and closes, in chunks of WriteChunk: the entry point of a source of
// files that keeps no cursor. The file passes
// CheckedReopen against want and mounts first; the whole runs under b,
// keyed by dev (the filesystem's device number).
func WriteOutFD(ctx context.Context, b *safeio.BoundedIO, procRoot string, pathFD int, want safeio.FileID, mounts *safeio.Mounts, dev uint64) error {
	var ferr error
	err := b.Do(ctx, safeio.DeviceKey(dev), func() {
		ferr = writeOutPathFD(procRoot, pathFD, want, mounts)
	})
	if errors.Is(err, safeio.ErrRefused) {
		unix.Close(pathFD) // never started
	}
	if err != nil {
		return err // if abandoned, its goroutine closes pathFD when it returns
	}
	return ferr
}

// writeOutPathFD checks and reopens pathFD, which it closes, and starts
// write-out of the whole file in chunks of WriteChunk.
func writeOutPathFD(procRoot string, pathFD int, want safeio.FileID, mounts *safeio.Mounts) error {
	defer unix.Close(pathFD)
	f, st, err := safeio.CheckedReopen(procRoot, pathFD, want, mounts)
	if err != nil {
		return err
	}
	defer f.Close()
	for off := int64(0); off < st.Size; off += WriteChunk {
		if err := unix.SyncFileRange(int(f.Fd()), off, min(WriteChunk, st.Size-off), unix.SYNC_FILE_RANGE_WRITE); err != nil {
			return fmt.Errorf("sync_file_range: %w", err)
		}
	}
	return nil
}

// taskFile is a regular file a task had open or mapped when listed: the
// /proc link that reaches it (even when it has been deleted), what it was
// listed as, and the filesystem it is on.
type taskFile struct {
	path string // procRoot/PID/fd/N or procRoot/PID/map_files/START-END
	want safeio.FileID
	dev  uint64 // the filesystem's device number, from mountinfo or maps
}

// key is what an operation on tf may block on: its mount when known.
func (tf taskFile) key() safeio.Key {
	if tf.want.MntID != 0 {
		return safeio.MountKey(tf.want.MntID)
	}
	return safeio.DeviceKey(tf.dev)
}

// cgroupFiles lists the files of the tasks in the cgroup at dir, as
// listFiles does, with bounds of its own. (reclaim_v1_test.go's
// measurement uses it.)
func cgroupFiles(ctx context.Context, procRoot, dir string, writing bool) ([]taskFile, error) {
	bio, err := safeio.NewBoundedIO(safeio.IOOptions{})
	if err != nil {
		return nil, err
	}
	files, _, err := listFiles(ctx, bio, procRoot, dir, writing)
	return files, err
}

// reopen checks and reopens tf with a table of mounts of its own, without
// a bound. (reclaim_v1_test.go's measurement uses it.)
func (tf taskFile) reopen() (*os.File, error) {
	procRoot := filepath.Dir(filepath.Dir(filepath.Dir(tf.path)))
	mounts := safeio.NewMounts(procRoot)
	pid, err := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(tf.path))))
	if err != nil {
		return nil, err
	}
	if err := mounts.Load(pid); err != nil {
		return nil, err
	}
	pfd, err := unix.Open(tf.path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(pfd)
	f, _, err := safeio.CheckedReopen(procRoot, pfd, tf.want, mounts)
	return f, err
}

// listFiles lists the distinct regular files on safe filesystems that the
// tasks of the cgroup at dir and of its descendants have open or mapped;
// with writing set, only those open for writing or mapped shared and
// writable. It returns them with the mounts of the tasks' namespaces. It
// reads only procfs, never the files: their /proc/PID/fdinfo and
// mountinfo say which mount each is on. Tasks that exit while they are
// read are skipped.
//
// The reading is one operation under bio, keyed by the cgroup: reading a
// task's maps waits for its mmap_lock, which a task blocked in a page
// fault on a hung filesystem holds, so the listing of such a cgroup is
// abandoned and not tried again until that read returns.
func listFiles(ctx context.Context, bio *safeio.BoundedIO, procRoot, dir string, writing bool) ([]taskFile, *safeio.Mounts, error) {
	pids, err := subtreeProcs(dir)
	if err != nil {
		return nil, nil, err
	}
	var (
		files []taskFile
		lerr  error
		// The listing's own table: an abandoned listing may still be
		// writing to it.
		mounts = safeio.NewMounts(procRoot)
	)
	err = bio.Do(ctx, safeio.ListingKey(dir), func() {
		files, lerr = listTasks(ctx, mounts, procRoot, pids, writing)
	})
	if err != nil {
		return nil, nil, err
	}
	if lerr != nil {
		return nil, nil, lerr
	}
	return files, mounts, nil
}

// listTasks is listFiles for the processes pids. It may block.
func listTasks(ctx context.Context, mounts *safeio.Mounts, procRoot string, pids []int, writing bool) ([]taskFile, error) {
	type key struct {
		kind     byte
		dev, ino uint64
	}
	seen := make(map[key]bool)
	var files []taskFile
	for _, pid := range pids {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := mounts.Load(pid); errors.Is(err, safeio.ErrBadMountInfo) {
			return nil, err
		} else if err != nil {
			continue // exited
		}
		proc := filepath.Join(procRoot, strconv.Itoa(pid))
		for _, fd := range openFiles(proc, writing) {
			if _, ok := mounts.Safe(fd.MntID); !ok || !fd.HasIno {
				continue
			}
			if k := (key{'m', fd.MntID, fd.Ino}); !seen[k] {
				seen[k] = true
				files = append(files, taskFile{path: filepath.Join(proc, "fd", fd.name), want: fd.FileID, dev: mounts.Dev(fd.MntID)})
			}
		}
		maps, err := mappedFiles(proc, writing)
		if err != nil {
			return nil, err
		}
		for _, m := range maps {
			if _, ok := mounts.SafeDev(m.Dev); !ok {
				continue
			}
			if k := (key{'d', m.Dev, m.Ino}); !seen[k] {
				seen[k] = true
				files = append(files, taskFile{path: filepath.Join(proc, "map_files", m.addr), want: safeio.FileID{Ino: m.Ino}, dev: m.Dev})
			}
		}
	}
	return files, nil
}

// openFD is a descriptor as its fdinfo lists it.
type openFD struct {
	name string // N in /proc/PID/fd/N
	safeio.FileID
	HasIno bool
}

// openFiles returns the descriptors of the task at proc that may be
// regular files (open for writing, with writing set), from their /proc
// link's text and fdinfo alone: neither asks anything of the file's
// filesystem (fs/proc/fd.c, proc_fd_link and seq_show; the text is
// d_path's). Pipes, sockets and anonymous inodes, whose link text is not
// a path, are skipped after one readlink(2).
func openFiles(proc string, writing bool) []openFD {
	fdDir := filepath.Join(proc, "fd")
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return nil // exited
	}
	var out []openFD
	var buf [512]byte
	for _, fd := range fds {
		n, err := unix.Readlink(fdDir+"/"+fd.Name(), buf[:])
		if err != nil || n == 0 || buf[0] != '/' {
			continue // closed meanwhile, or "pipe:[N]", "socket:[N]", "anon_inode:..."
		}
		b, err := safeio.ReadSmall(proc+"/fdinfo/"+fd.Name(), buf[:])
		if err != nil {
			continue
		}
		var fi format.FDInfo
		if format.ParseFDInfo(b, &fi) != nil {
			continue
		}
		if fi.Flags&unix.O_PATH != 0 || writing && !forWriting(fi.Flags) {
			continue
		}
		out = append(out, openFD{name: fd.Name(), FileID: safeio.FileID{MntID: fi.MntID, Ino: fi.Ino}, HasIno: fi.HasIno})
	}
	return out
}

// forWriting reports whether open flags allow writing: O_WRONLY or O_RDWR
// in the O_ACCMODE bits.
func forWriting(flags uint64) bool {
	mode := flags & unix.O_ACCMODE
	return mode == unix.O_WRONLY || mode == unix.O_RDWR
}

// mapping is a file mapping of /proc/PID/maps.
type mapping struct {
	addr     string // START-END, its name in map_files
	Dev, Ino uint64
}

// mappedFiles returns the file mappings of the task at proc (shared and
// writable, with writing set), one per file. They are reopened through
// /proc/PID/map_files, which needs CAP_SYS_ADMIN but reaches deleted
// files and paths with spaces alike.
func mappedFiles(proc string, writing bool) ([]mapping, error) {
	p := filepath.Join(proc, "maps")
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, nil // exited
	}
	seen := make(map[[2]uint64]bool) // one per "dev inode", not per mapping
	var out []mapping
	err = format.ParseMaps(b, func(m format.Mapping) {
		if m.Inode == 0 || writing && !(m.Write && m.Shared) {
			return
		}
		dev := unix.Mkdev(m.Major, m.Minor)
		if k := [2]uint64{dev, m.Inode}; !seen[k] {
			seen[k] = true
			// map_files names a mapping by its unpadded range
			// (fs/proc/base.c, proc_map_files_readdir), which maps
			// pads to 8 digits.
			addr := strconv.FormatUint(m.Start, 16) + "-" + strconv.FormatUint(m.End, 16)
			out = append(out, mapping{addr: addr, Dev: dev, Ino: m.Inode})
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	return out, nil
}

// subtreeProcs returns the processes in the cgroup at dir and its
// descendants (cgroup.procs of each). The cgroup itself missing is
// host.ErrVanished; a descendant removed meanwhile is skipped, and so is
// a threaded descendant (a v2 pace group), whose cgroup.procs cannot be
// read: its threads' processes are listed by its threaded domain above
// (kernel/cgroup/cgroup.c, cgroup_procs_start).
func subtreeProcs(dir string) ([]int, error) {
	pids, err := readProcs(dir)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, ctlfile.Vanished(err))
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		sub, err := subtreeProcs(filepath.Join(dir, e.Name()))
		if errors.Is(err, host.ErrVanished) || errors.Is(err, unix.EOPNOTSUPP) {
			continue
		}
		if err != nil {
			return nil, err
		}
		pids = append(pids, sub...)
	}
	return pids, nil
}

// readProcs reads the process IDs in dir/cgroup.procs.
func readProcs(dir string) ([]int, error) {
	s, err := ctlfile.Read(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(s) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("read %s/cgroup.procs: %q is not a process ID", dir, f)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}
