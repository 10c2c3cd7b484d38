package cgroupfs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/memcgd/memcgd/host"
	"golang.org/x/sys/unix"
)

// WriteOut starts write-out of the dirty pages of the files cg's tasks
// (those of its descendants included, as memory charges are hierarchical)
// are writing: regular files open for writing, found by the O_ACCMODE
// bits of /proc/PID/fdinfo/N, and shared writable file mappings, found in
// /proc/PID/maps. Each distinct file (device and inode) gets one
// sync_file_range(SYNC_FILE_RANGE_WRITE) over its whole length, which
// queues its dirty pages for I/O without waiting for them
// (fs/sync.c sync_file_range, mm/filemap.c __filemap_fdatawrite_range with
// WB_SYNC_NONE). Files of other cgroups are touched only when a task of
// cg has them open too. Tasks and files that vanish meanwhile are skipped.
//
// Dirty pages of files the cgroup's tasks no longer have open are out of
// reach: that is what Flush is for.
func WriteOut(ctx context.Context, procRoot string, l Layout, cg host.Cgroup) (host.WriteOut, error) {
	dir := l.Memory.Dir(cg)
	if dir == "" {
		return host.WriteOut{}, fmt.Errorf("write out %s: outside the mounted memory hierarchy %s", cg, l.Memory.Mount)
	}
	dirty, err := dirtyBytes(l.Memory.Version, dir)
	if err != nil {
		return host.WriteOut{}, fmt.Errorf("write out %s: %w", cg, err)
	}
	files, err := cgroupFiles(ctx, procRoot, dir, true)
	if err != nil {
		return host.WriteOut{}, fmt.Errorf("write out %s: %w", cg, err)
	}
	out := host.WriteOut{Bytes: dirty}
	var errs []error
	for _, tf := range files {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		f, err := tf.reopen()
		if err != nil {
			continue // the task closed it, exited, or the fd now names another file
		}
		err = unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
		f.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("sync_file_range %s: %w", tf.path, err))
			continue
		}
		out.Files++
	}
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("write out %s: %w", cg, err)
	}
	return out, nil
}

// taskFile is a regular file a task has open or mapped: the /proc link that
// reopens it (even when it has been deleted) and its device and inode.
type taskFile struct {
	path     string // procRoot/PID/fd/N or procRoot/PID/map_files/START-END
	dev, ino uint64
}

// reopen opens the file again through its /proc link, read-only and
// without blocking (the link might meanwhile name a FIFO), and checks that
// it is still the file that was listed.
func (tf taskFile) reopen() (*os.File, error) {
	f, err := os.OpenFile(tf.path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Dev != tf.dev || st.Ino != tf.ino {
		f.Close()
		return nil, fmt.Errorf("%s: no longer the file listed", tf.path)
	}
	return f, nil
}

// cgroupFiles lists the distinct regular files the tasks of the cgroup at
// dir and of its descendants have open or mapped; with writing set, only
// those open for writing or mapped shared and writable. Tasks that exit
// while they are read are skipped.
func cgroupFiles(ctx context.Context, procRoot, dir string, writing bool) ([]taskFile, error) {
	pids, err := subtreeProcs(dir)
	if err != nil {
		return nil, err
	}
	type key struct{ dev, ino uint64 }
	seen := make(map[key]bool)
	var files []taskFile
	add := func(tf taskFile) {
		if k := (key{tf.dev, tf.ino}); !seen[k] {
			seen[k] = true
			files = append(files, tf)
		}
	}
	for _, pid := range pids {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		proc := filepath.Join(procRoot, strconv.Itoa(pid))
		openFiles(proc, writing, add)
		mappedFiles(proc, writing, add)
	}
	return files, nil
}

// openFiles passes to add each regular file the task at proc has open
// (for writing, with writing set).
func openFiles(proc string, writing bool, add func(taskFile)) {
	fds, err := os.ReadDir(filepath.Join(proc, "fd"))
	if err != nil {
		return // exited
	}
	for _, fd := range fds {
		p := filepath.Join(proc, "fd", fd.Name())
		var st unix.Stat_t
		if unix.Stat(p, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		if writing && !openForWriting(filepath.Join(proc, "fdinfo", fd.Name())) {
			continue
		}
		add(taskFile{path: p, dev: st.Dev, ino: st.Ino})
	}
}

// openForWriting reports whether the fdinfo file shows O_WRONLY or O_RDWR
// in its "flags:" line, printed in octal (fs/proc/fd.c seq_show).
func openForWriting(fdinfo string) bool {
	b, err := os.ReadFile(fdinfo)
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(b)) {
		v, ok := strings.CutPrefix(line, "flags:")
		if !ok {
			continue
		}
		flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
		if err != nil {
			return false
		}
		mode := flags & unix.O_ACCMODE
		return mode == unix.O_WRONLY || mode == unix.O_RDWR
	}
	return false
}

// mappedFiles passes to add each regular file the task at proc has mapped
// (shared and writable, with writing set), opened through
// /proc/PID/map_files, which needs CAP_SYS_ADMIN but reaches deleted files
// and paths with spaces alike.
func mappedFiles(proc string, writing bool, add func(taskFile)) {
	b, err := os.ReadFile(filepath.Join(proc, "maps"))
	if err != nil {
		return
	}
	seen := make(map[string]bool) // one stat per "dev inode", not per mapping
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// address perms offset dev inode [path] (fs/proc/task_mmu.c show_map_vma)
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[4] == "0" || len(f[1]) != 4 {
			continue // anonymous
		}
		if writing && (f[1][1] != 'w' || f[1][3] != 's') {
			continue
		}
		if id := f[3] + " " + f[4]; !seen[id] {
			seen[id] = true
			p := filepath.Join(proc, "map_files", f[0])
			var st unix.Stat_t
			if unix.Stat(p, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
				continue
			}
			add(taskFile{path: p, dev: st.Dev, ino: st.Ino})
		}
	}
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
		return nil, fmt.Errorf("list %s: %w", dir, vanished(err))
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
	s, err := readControl(filepath.Join(dir, "cgroup.procs"))
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

// dirtyBytes reads the cgroup's dirty page cache, hierarchical: v1's
// total_dirty, v2's file_dirty (mm/memcontrol.c memory_stats[],
// mm/memcontrol-v1.c memcg1_stat_names).
func dirtyBytes(v Version, dir string) (uint64, error) {
	key := "total_dirty"
	if v == V2 {
		key = "file_dirty"
	}
	return statKey(filepath.Join(dir, "memory.stat"), key)
}

// statKey returns one key of a memory.stat file.
func statKey(p, key string) (uint64, error) {
	s, err := readControl(p)
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
