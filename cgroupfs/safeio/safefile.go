package safeio

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/format"
)

// A tenant controls what its descriptors and mappings name, and can
// change it at any moment: between memcgd listing a file and opening it,
// the slot /proc/PID/fd/N may be dup2'd to a device (whose open may arm
// a watchdog or rewind a tape), a FIFO, or a file on a FUSE mount the
// tenant serves. So memcgd never opens a tenant's /proc link for I/O:
//
//  1. it opens the link with O_PATH, which resolves it to the file
//     without calling the file's open (fs/open.c, do_dentry_open returns
//     before f_op->open for O_PATH) and pins the mount and the inode;
//  2. it checks THAT descriptor (CheckedReopen): its mount (from
//     /proc/self/fdinfo, which touches no filesystem) is the one listed
//     and holds a filesystem on the allow-list, and fstat shows a regular
//     file with the listed inode;
//  3. only then it opens the file for reading through /proc/self/fd/<the
//     O_PATH descriptor>, which the tenant cannot change.
//
// Each step runs under BoundedIO. The mount is checked before fstat, so
// that fstat never reaches a filesystem that might not answer.

// SafeFS reports whether memcgd may open, stat and write out files of a
// filesystem of type fstype (mountinfo's filesystem type). The list holds
// local filesystems on block devices with the kernel's own writeback:
// their stat, open and close do not wait for anyone but the disk. Left
// out, on purpose:
//   - network filesystems (nfs, nfs4, cifs, smb3, ceph, 9p, afs,
//     glusterfs via fuse): a dead server blocks every call;
//   - FUSE (fuse, fuse.*, fuseblk): a daemon, possibly the tenant's,
//     answers every call, or never does;
//   - tmpfs, ramfs, shmem-backed files: never written back (no dirty
//     pages to start, shmem is swap-backed);
//   - overlay: its files reach their lower layers, which may be any of
//     the above, and its page cache lives in the upper layer's inodes;
//     a writer in a container's overlay root is left to Flush of the
//     upper filesystem and to the kernel's flushers.
//
// An unknown type is unsafe.
func SafeFS(fstype string) bool {
	switch fstype {
	case "ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "bcachefs", "jfs", "nilfs2", "reiserfs",
		"vfat", "msdos", "exfat", "ntfs3":
		return true
	}
	return false
}

// ErrUnsafeFile reports a descriptor that failed CheckedReopen's check.
var ErrUnsafeFile = errors.New("not a regular file on a filesystem memcgd may touch")

// FileID is what a file was listed as: CheckedReopen opens it only if the
// descriptor still names it. Zero fields are not checked.
type FileID struct {
	// MntID is the mount the file was listed through (fdinfo's mnt_id).
	MntID uint64
	// Dev and Ino are its device and inode numbers.
	Dev, Ino uint64
}

// CheckedReopen checks that pathFD, a descriptor opened with O_PATH (or
// any descriptor memcgd holds), names a regular file on a safe filesystem
// (mounts.Safe of the mount it was opened through) with the identity
// want, and opens that file for reading, without blocking, without
// making it a controlling terminal and, where the caller may, without
// updating its access time. It returns the file and its fstat. procRoot
// is procfs's mount point, whose self/fdinfo and self/fd it uses.
//
// Every file memcgd writes out or flushes passes through it; a second
// source of files (the eBPF tracker's closed files) must too. It may
// block on the file's filesystem (fstat, open): call it under BoundedIO.
func CheckedReopen(procRoot string, pathFD int, want FileID, mounts *Mounts) (*os.File, unix.Stat_t, error) {
	var st unix.Stat_t
	mnt, err := fdMount(procRoot, pathFD)
	if err != nil {
		return nil, st, err
	}
	if want.MntID != 0 && mnt != want.MntID {
		return nil, st, fmt.Errorf("mount %d, listed on mount %d: %w", mnt, want.MntID, ErrUnsafeFile)
	}
	if fstype, ok := mounts.Safe(mnt); !ok {
		return nil, st, fmt.Errorf("mount %d (%q): %w", mnt, fstype, ErrUnsafeFile)
	}
	if err := unix.Fstat(pathFD, &st); err != nil {
		return nil, st, fmt.Errorf("fstat: %w", err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, st, fmt.Errorf("mode %#o: %w", st.Mode, ErrUnsafeFile)
	case want.Ino != 0 && st.Ino != want.Ino, want.Dev != 0 && st.Dev != want.Dev:
		return nil, st, fmt.Errorf("inode %d on %d:%d, listed as %d on %d:%d: %w",
			st.Ino, unix.Major(st.Dev), unix.Minor(st.Dev), want.Ino, unix.Major(want.Dev), unix.Minor(want.Dev), ErrUnsafeFile)
	}
	p := procRoot + "/self/fd/" + strconv.Itoa(pathFD)
	const flags = unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC
	fd, err := unix.Open(p, flags|unix.O_NOATIME, 0)
	if err == unix.EPERM {
		// O_NOATIME needs the file's owner or CAP_FOWNER.
		fd, err = unix.Open(p, flags, 0)
	}
	if err != nil {
		return nil, st, fmt.Errorf("reopen: %w", err)
	}
	return os.NewFile(uintptr(fd), p), st, nil
}

// fdMount returns the mount ID of our descriptor fd, from
// /proc/self/fdinfo: procfs answers without asking the file's filesystem.
func fdMount(procRoot string, fd int) (uint64, error) {
	var buf [256]byte
	b, err := ReadSmall(procRoot+"/self/fdinfo/"+strconv.Itoa(fd), buf[:])
	if err != nil {
		return 0, err
	}
	var fi format.FDInfo
	if err := format.ParseFDInfo(b, &fi); err != nil {
		return 0, fmt.Errorf("fdinfo of our descriptor %d: %w", fd, err)
	}
	return fi.MntID, nil
}

// ReadSmall reads a small procfs file into buf with one read(2): a
// task's fdinfo, which procfs answers without asking the file's filesystem.
func ReadSmall(p string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: p, Err: err}
		}
		return buf[:n], nil
	}
}

// Mounts maps mount IDs and device numbers to filesystem types, from the
// mountinfo of each mount namespace memcgd meets tasks in. Mount IDs are
// unique across namespaces but reused once freed (fs/namespace.c,
// mnt_alloc_id), so a Mounts is built per write-out or flush and thrown
// away: a mount freed and its ID reused within that call could be
// misjudged, which BoundedIO still bounds. Not safe for concurrent use.
type Mounts struct {
	procRoot string
	loaded   map[string]bool // mount namespaces read, by /proc/PID/ns/mnt link
	byID     map[uint64]mountEntry
	byDev    map[uint64]string // filesystem type by device number
}

// mountEntry is what Mounts knows of one mount.
type mountEntry struct {
	fstype string
	dev    uint64 // mountinfo's major:minor
}

// NewMounts returns an empty table reading procRoot.
func NewMounts(procRoot string) *Mounts {
	return &Mounts{procRoot: procRoot, loaded: map[string]bool{}, byID: map[uint64]mountEntry{}, byDev: map[uint64]string{}}
}

// ErrBadMountInfo reports a mountinfo file the parser does not understand.
var ErrBadMountInfo = errors.New("unexpected mountinfo")

// Load adds the mounts of pid's mount namespace, once per namespace. A
// process gone meanwhile is an error wrapping fs.ErrNotExist or ESRCH.
func (m *Mounts) Load(pid int) error {
	proc := m.procRoot + "/" + strconv.Itoa(pid)
	ns, err := os.Readlink(proc + "/ns/mnt")
	if err != nil {
		return err
	}
	if m.loaded[ns] {
		return nil
	}
	b, err := os.ReadFile(proc + "/mountinfo")
	if err != nil {
		return err
	}
	mounts, err := format.ParseMountInfo(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("read %s/mountinfo: %w: %w", proc, ErrBadMountInfo, err)
	}
	for _, mt := range mounts {
		dev := unix.Mkdev(mt.Major, mt.Minor)
		m.byID[uint64(mt.ID)] = mountEntry{fstype: mt.FSType, dev: dev}
		m.byDev[dev] = mt.FSType
	}
	m.loaded[ns] = true
	return nil
}

// Safe returns the type of the filesystem at mount ID id and whether
// SafeFS allows it; an unknown mount is unsafe.
func (m *Mounts) Safe(id uint64) (string, bool) {
	e, ok := m.byID[id]
	return e.fstype, ok && SafeFS(e.fstype)
}

// SafeDev is Safe by device number.
func (m *Mounts) SafeDev(dev uint64) (string, bool) {
	t, ok := m.byDev[dev]
	return t, ok && SafeFS(t)
}

// Dev returns the device number of the filesystem at mount ID id, as
// mountinfo gives it: what tells one filesystem from another.
func (m *Mounts) Dev(id uint64) uint64 {
	return m.byID[id].dev
}
