package act

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/format"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/cgroupfs/safeio"
	"github.com/memcgd/memcgd/host"
)

// WriteOut starts write-out of the dirty pages of the files cg's tasks
// (those of its descendants included, as memory charges are hierarchical)
// are writing: regular files open for writing, found by the O_ACCMODE
// bits of /proc/PID/fdinfo/N, and shared writable file mappings, found in
// /proc/PID/maps, on filesystems SafeFS allows. Each distinct file
// (device and inode) gets one sync_file_range(SYNC_FILE_RANGE_WRITE) over
// its whole length, which queues its dirty pages for I/O without waiting
// for them (fs/sync.c sync_file_range, mm/filemap.c
// __filemap_fdatawrite_range with WB_SYNC_NONE). Files of other cgroups
// are touched only when a task of cg has them open too. Tasks and files
// that vanish meanwhile are skipped, and so are descriptors that stop
// naming the file listed (CheckedReopen). Every operation that may block
// runs under bio.
//
// Dirty pages of files the cgroup's tasks no longer have open are out of
// reach: that is what Flush is for.
func WriteOut(ctx context.Context, bio *safeio.BoundedIO, procRoot string, l layout.Layout, cg host.Cgroup) (host.WriteOut, error) {
	out, _, err := WriteOutFiles(ctx, bio, procRoot, l, cg)
	return out, err
}

// WriteOutFiles is WriteOut, also returning the files it started, for a
// second source of files to skip (cgroupfs.FS.WriteOut, among the
// tracker's: WriteOutTracked).
func WriteOutFiles(ctx context.Context, bio *safeio.BoundedIO, procRoot string, l layout.Layout, cg host.Cgroup) (host.WriteOut, *FileSet, error) {
	done := NewFileSet()
	dirty, err := DirtyBytes(l, cg)
	if err != nil {
		return host.WriteOut{}, done, err
	}
	files, mounts, err := listFiles(ctx, bio, procRoot, l.Memory.Dir(cg), true)
	if err != nil {
		return host.WriteOut{}, done, fmt.Errorf("write out %s: %w", cg, err)
	}
	out := host.WriteOut{Bytes: dirty}
	var errs []error
	// One bounded operation per filesystem, not per file: a handoff to
	// a goroutine costs more than the system calls for a file, and a
	// filesystem that stops answering is abandoned whole anyway.
	for _, group := range byKey(files) {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		var started int
		err := bio.Do(ctx, group[0].key(), func() {
			for _, tf := range group {
				if ok, err := writeOutTaskFile(procRoot, tf, mounts, done); ok && err == nil {
					started++
				}
				// Otherwise the task closed it, exited, or the slot
				// now names another file.
			}
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("write out %d files: %w", len(group), err))
			continue
		}
		out.Files += started
	}
	if err := errors.Join(errs...); err != nil {
		return out, done, fmt.Errorf("write out %s: %w", cg, err)
	}
	return out, done, nil
}

// byKey groups files by what an operation on them may block on, in the
// order of their first appearance.
func byKey(files []taskFile) [][]taskFile {
	index := make(map[safeio.Key]int)
	var groups [][]taskFile
	for _, tf := range files {
		i, ok := index[tf.key()]
		if !ok {
			i = len(groups)
			index[tf.key()] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], tf)
	}
	return groups
}

// writeOutTaskFile opens tf's /proc link with O_PATH, checks and reopens
// it, and starts its write-out. started is false when done already holds
// the file. It may block: call it under BoundedIO.
func writeOutTaskFile(procRoot string, tf taskFile, mounts *safeio.Mounts, done *FileSet) (started bool, err error) {
	pfd, err := unix.Open(tf.path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	return writeOutPathFD(procRoot, pfd, tf.want, mounts, done)
}

// WriteOutFD starts write-out of the file pathFD names, a descriptor
// (opened with O_PATH, or otherwise) that WriteOutFD takes over and
// closes: the entry point of a second source of files, such as an eBPF
// tracker's closed files reopened by handle. The file passes
// CheckedReopen against want and mounts first; the whole runs under b,
// keyed by dev (the filesystem's device number).
func WriteOutFD(ctx context.Context, b *safeio.BoundedIO, procRoot string, pathFD int, want safeio.FileID, mounts *safeio.Mounts, dev uint64) error {
	var ferr error
	err := b.Do(ctx, safeio.DeviceKey(dev), func() {
		_, ferr = writeOutPathFD(procRoot, pathFD, want, mounts, NewFileSet())
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
// write-out of the file unless done already holds it.
func writeOutPathFD(procRoot string, pathFD int, want safeio.FileID, mounts *safeio.Mounts, done *FileSet) (bool, error) {
	defer unix.Close(pathFD)
	f, st, err := safeio.CheckedReopen(procRoot, pathFD, want, mounts)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if !done.add(st.Dev, st.Ino) {
		return false, nil
	}
	if err := unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE); err != nil {
		return false, fmt.Errorf("sync_file_range: %w", err)
	}
	return true, nil
}

// FileSet is a set of files by device and inode, safe for concurrent use
// (an abandoned operation may still add to it).
type FileSet struct {
	mu sync.Mutex
	m  map[[2]uint64]bool
}

// NewFileSet returns an empty set.
func NewFileSet() *FileSet { return &FileSet{m: make(map[[2]uint64]bool)} }

// add adds a file and reports whether it was new.
func (s *FileSet) add(dev, ino uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]uint64{dev, ino}
	if s.m[k] {
		return false
	}
	s.m[k] = true
	return true
}

// has reports whether the set holds the file.
func (s *FileSet) has(dev, ino uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[[2]uint64{dev, ino}]
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
// host.ErrVanished; a descendant removed meanwhile is skipped.
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
		if errors.Is(err, host.ErrVanished) {
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

// DirtyBytes is cg's dirty page cache, hierarchical, as a write-out
// reports it.
func DirtyBytes(l layout.Layout, cg host.Cgroup) (uint64, error) {
	dir := l.Memory.Dir(cg)
	if dir == "" {
		return 0, fmt.Errorf("write out %s: outside the mounted memory hierarchy %s", cg, l.Memory.Mount)
	}
	dirty, err := dirtyBytes(l.Memory.Version, dir)
	if err != nil {
		return 0, fmt.Errorf("write out %s: %w", cg, err)
	}
	return dirty, nil
}

// dirtyBytes reads the cgroup's dirty page cache, hierarchical: v1's
// total_dirty, v2's file_dirty (mm/memcontrol.c memory_stats[],
// mm/memcontrol-v1.c memcg1_stat_names).
func dirtyBytes(v layout.Version, dir string) (uint64, error) {
	key := "total_dirty"
	if v == layout.V2 {
		key = "file_dirty"
	}
	return statKey(filepath.Join(dir, "memory.stat"), key)
}

// statKey returns one key of a memory.stat file.
func statKey(p, key string) (uint64, error) {
	s, err := ctlfile.Read(p)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(s) {
		k, v, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		if ok && k == key {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("read %s: %s %q: want a decimal number", p, key, v)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("read %s: no %s line", p, key)
}
