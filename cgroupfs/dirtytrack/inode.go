package dirtytrack

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"

	"github.com/cilium/ebpf"
	"github.com/memcgd/memcgd/cgroupfs/format"
	"golang.org/x/sys/unix"
)

// Inode is a regular file whose pages a cgroup dirtied.
type Inode struct {
	// Cgroup is the cgroup it was recorded for: the memcg that owns the
	// pages, or one of its watched ancestors.
	Cgroup uint64
	// Dev is the superblock's device as stat(2) reports it in st_dev.
	Dev uint64
	// Ino and Generation are the inode number and i_generation, which
	// name the file in a file handle.
	Ino        uint64
	Generation uint32
	// jiffies is when it was last recorded, to list recent files first.
	jiffies uint64
}

// ErrRefused is wrapped by OpenInode's error for an inode that is not a
// regular file on a local filesystem the tracker reopens files of.
var ErrRefused = errors.New("refused")

// handleFS are the filesystems whose file handles OpenInode builds: local,
// block-backed, with FILEID_INO32_GEN handles. Their statfs magic numbers
// (include/uapi/linux/magic.h) by mountinfo type.
var handleFS = map[string]int64{
	"ext2": unix.EXT4_SUPER_MAGIC,
	"ext3": unix.EXT4_SUPER_MAGIC,
	"ext4": unix.EXT4_SUPER_MAGIC,
	"xfs":  unix.XFS_SUPER_MAGIC,
}

// kernelDev converts the kernel's internal dev_t (MAJOR << 20 | MINOR,
// include/linux/kdev_t.h) to the one stat(2) reports.
func kernelDev(d uint32) uint64 { return unix.Mkdev(d>>20, d&(1<<20-1)) }

// Inodes returns the files recorded for the cgroup id, most recently
// dirtied first. For a watched cgroup they include its descendants'. The
// record is an LRU of Options.MaxInodes entries over all cgroups: the
// oldest are forgotten.
func (t *Tracker) Inodes(id uint64) ([]Inode, error) {
	t.mu.Lock()
	gone := make(map[uint64]bool, len(t.gone))
	for g := range t.gone {
		gone[g] = true
	}
	t.mu.Unlock()

	var out []Inode
	var stale []dirtytrackInodeKey
	const batch = 4096
	t.scanMu.Lock()
	defer t.scanMu.Unlock()
	if t.scanKeys == nil {
		t.scanKeys, t.scanVals = make([]dirtytrackInodeKey, batch), make([]dirtytrackInodeVal, batch)
	}
	keys, vals := t.scanKeys, t.scanVals
	var cursor ebpf.MapBatchCursor
	for {
		n, err := t.objs.Inodes.BatchLookup(&cursor, keys, vals, nil)
		for i := range n {
			k, v := keys[i], vals[i]
			switch {
			case k.Cgroup == id:
				out = append(out, Inode{Cgroup: k.Cgroup, Dev: kernelDev(k.Dev), Ino: k.Ino, Generation: v.Generation, jiffies: v.Jiffies})
			case gone[k.Cgroup]:
				stale = append(stale, k)
			}
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("dirtytrack: inodes of cgroup %d: %w", id, err)
		}
	}
	// Records of removed or unwatched cgroups go as they are met.
	for _, k := range stale {
		_ = t.objs.Inodes.Delete(k) // gone already if evicted meanwhile
	}
	if len(stale) > 0 {
		t.mu.Lock()
		for g := range gone {
			delete(t.gone, g)
		}
		t.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b Inode) int { return cmp.Compare(b.jiffies, a.jiffies) })
	return out, nil
}

// recentLen is the length of each watched cgroup's ring of recently
// dirtied inodes: RECENT in bpf/dirtytrack.c.
const recentLen = 16

// Recent returns the last distinct inodes, up to 16, that the subtree of
// the watched cgroup id dirtied since it was watched, newest first: what
// a write-out of a throttled cgroup needs at once, read with at most 16
// map lookups whatever the number of records Inodes would scan (26 ms
// for a full inodes map of 65,536; BenchmarkInodes). Entries the LRU of
// Options.MaxRecent evicted are missing; Inodes has the rest.
func (t *Tracker) Recent(id uint64) ([]Inode, error) {
	c, err := t.count(id)
	if err != nil {
		return nil, fmt.Errorf("dirtytrack: recent inodes of cgroup %d: %w", id, err)
	}
	n := min(c.Recent, recentLen)
	out := make([]Inode, 0, n)
	seen := make(map[[2]uint64]bool, n)
	for i := range n {
		var v dirtytrackRecentVal
		k := dirtytrackRecentKey{Id: id, Idx: uint32((c.Recent - 1 - i) % recentLen)}
		if err := t.objs.Recent.Lookup(k, &v); errors.Is(err, ebpf.ErrKeyNotExist) {
			continue // evicted
		} else if err != nil {
			return nil, fmt.Errorf("dirtytrack: recent inodes of cgroup %d: %w", id, err)
		}
		dev := kernelDev(v.Dev)
		if seen[[2]uint64{dev, v.Ino}] {
			continue
		}
		seen[[2]uint64{dev, v.Ino}] = true
		out = append(out, Inode{Cgroup: id, Dev: dev, Ino: v.Ino, Generation: v.Generation})
	}
	return out, nil
}

// OpenInode reopens a recorded file with open_by_handle_at(2) on a mount
// of its filesystem, read-only, without blocking on a lease and without
// becoming a controlling terminal. It refuses, wrapping ErrRefused, any
// inode that is not a regular file on ext2/3/4 or xfs: the inode comes from
// tenants' writes, and the daemon must never open a device, FIFO or socket
// for them. The handle is first opened O_PATH, which runs no driver's open,
// and checked with fstat before the file is opened for reading through
// /proc/self/fd. A deleted file gives an error wrapping unix.ESTALE.
// It needs CAP_DAC_READ_SEARCH. The mount's root is opened for the call
// only: a descriptor kept open would make the filesystem busy, and a
// tenant's volume could not be unmounted.
func (t *Tracker) OpenInode(ino Inode) (*os.File, error) {
	mnt, err := t.openMount(ino.Dev)
	if err != nil {
		return nil, fmt.Errorf("open inode %d on %s: %w", ino.Ino, devString(ino.Dev), err)
	}
	defer mnt.Close()
	return openInode(mnt, ino)
}

func devString(d uint64) string {
	return strconv.FormatUint(uint64(unix.Major(d)), 10) + ":" + strconv.FormatUint(uint64(unix.Minor(d)), 10)
}

// openInode opens ino on the filesystem mounted at mnt.
func openInode(mnt *os.File, ino Inode) (*os.File, error) {
	what := fmt.Sprintf("open inode %d on %s", ino.Ino, devString(ino.Dev))
	h := fileHandle(ino)
	pfd, err := unix.OpenByHandleAt(int(mnt.Fd()), h, unix.O_PATH|unix.O_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("%s: open_by_handle_at: %w", what, err)
	}
	defer unix.Close(pfd)
	if err := checkInode(pfd, ino); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	p := "/proc/self/fd/" + strconv.Itoa(pfd)
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: reopen %s: %w", what, p, err)
	}
	if err := checkInode(int(f.Fd()), ino); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return f, nil
}

// checkInode accepts fd only if it is the regular file ino on a filesystem
// of handleFS.
func checkInode(fd int, ino Inode) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("fstat: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%w: mode %#o is not a regular file", ErrRefused, st.Mode&unix.S_IFMT)
	}
	if st.Dev != ino.Dev || st.Ino != ino.Ino {
		return fmt.Errorf("%w: the handle opened %s inode %d, not the one recorded", ErrRefused, devString(st.Dev), st.Ino)
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return fmt.Errorf("fstatfs: %w", err)
	}
	for _, magic := range handleFS {
		if sfs.Type == magic {
			return nil
		}
	}
	return fmt.Errorf("%w: filesystem magic %#x is not ext2/3/4 or xfs", ErrRefused, sfs.Type)
}

// fileHandle builds the handle ext4 and xfs export for a file
// (fs/ext4/super.c, fs/xfs/xfs_export.c, include/linux/exportfs.h):
// FILEID_INO32_GEN {u32 ino, u32 gen}, or on xfs with 64-bit inode numbers
// FILEID_INO32_GEN | XFS_FILEID_TYPE_64FLAG {u64 ino, u32 gen}.
func fileHandle(ino Inode) unix.FileHandle {
	const fileidIno32Gen, xfs64Flag = 1, 0x80
	le := binary.LittleEndian
	if ino.Ino <= 0xffffffff {
		b := make([]byte, 8)
		le.PutUint32(b, uint32(ino.Ino))
		le.PutUint32(b[4:], ino.Generation)
		return unix.NewFileHandle(fileidIno32Gen, b)
	}
	b := make([]byte, 12)
	le.PutUint64(b, ino.Ino)
	le.PutUint32(b[8:], ino.Generation)
	return unix.NewFileHandle(fileidIno32Gen|xfs64Flag, b)
}

// openMount opens the root of a mount of the filesystem on dev: the mount
// point remembered for dev if it still is one, else the first found in
// /proc/self/mountinfo among handleFS types, preferring a mount of the
// filesystem's root.
func (t *Tracker) openMount(dev uint64) (*os.File, error) {
	t.mu.Lock()
	known, ok := t.mounts[dev]
	t.mu.Unlock()
	if ok {
		if f, err := openMountPoint(known, dev); err == nil {
			return f, nil
		}
	}
	const mountinfo = "/proc/self/mountinfo"
	mi, err := os.Open(mountinfo)
	if err != nil {
		return nil, err
	}
	defer mi.Close()
	mounts, err := format.ParseMountInfo(mi)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", mountinfo, err)
	}
	slices.SortStableFunc(mounts, func(a, b format.Mount) int {
		return cmp.Compare(boolInt(a.Root != "/"), boolInt(b.Root != "/"))
	})
	for _, m := range mounts {
		if _, ok := handleFS[m.FSType]; !ok {
			continue
		}
		f, err := openMountPoint(m.MountPoint, dev)
		if err != nil {
			continue
		}
		t.mu.Lock()
		t.mounts[dev] = m.MountPoint
		t.mu.Unlock()
		return f, nil
	}
	return nil, fmt.Errorf("%w: no ext2/3/4 or xfs mount of the device in %s", ErrRefused, mountinfo)
}

// openMountPoint opens dir if it is on dev and a filesystem of handleFS.
func openMountPoint(dir string, dev uint64) (*os.File, error) {
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	var sfs unix.Statfs_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Dev != dev {
		f.Close()
		return nil, fmt.Errorf("%s: not on %s", dir, devString(dev))
	}
	if err := unix.Fstatfs(int(f.Fd()), &sfs); err != nil || !slices.Contains(slices.Collect(maps.Values(handleFS)), sfs.Type) {
		f.Close()
		return nil, fmt.Errorf("%s: not ext2/3/4 or xfs", dir)
	}
	return f, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// WriteOutResult counts what WriteOutInodes did.
type WriteOutResult struct {
	// Files had sync_file_range(SYNC_FILE_RANGE_WRITE) issued.
	Files int
	// Stale were deleted meanwhile (ESTALE): a normal skip.
	Stale int
	// Refused were not regular files on a supported filesystem.
	Refused int
}

// WriteOutInodes starts write-out of each file in inodes (distinct device
// and inode once) with sync_file_range(SYNC_FILE_RANGE_WRITE), which
// queues the dirty pages for I/O without waiting for them (fs/sync.c). It
// stops when ctx is done, between files: a caller bounds it with a
// deadline. Deleted and refused files are counted, not errors.
func (t *Tracker) WriteOutInodes(ctx context.Context, inodes []Inode) (WriteOutResult, error) {
	type key struct{ dev, ino uint64 }
	seen := make(map[key]bool, len(inodes))
	var res WriteOutResult
	var errs []error
	for _, ino := range inodes {
		if k := (key{ino.Dev, ino.Ino}); seen[k] {
			continue
		} else {
			seen[k] = true
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		f, err := t.OpenInode(ino)
		switch {
		case errors.Is(err, unix.ESTALE) || errors.Is(err, unix.ENOENT):
			res.Stale++
			continue
		case errors.Is(err, ErrRefused):
			res.Refused++
			continue
		case err != nil:
			errs = append(errs, err)
			continue
		}
		err = unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
		f.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("sync_file_range inode %d on %s: %w", ino.Ino, devString(ino.Dev), err))
			continue
		}
		res.Files++
	}
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("dirtytrack: write out: %w", err)
	}
	return res, nil
}
