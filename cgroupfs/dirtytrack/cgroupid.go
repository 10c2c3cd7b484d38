package dirtytrack

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// fileidKernfs is the handle type kernfs exports (include/linux/exportfs.h
// FILEID_KERNFS): the 8-byte node id, the id the tracker reports.
const fileidKernfs = 0xfe

// CgroupID returns the id of the cgroup whose directory is dir, in the
// hierarchy that hosts the memory controller: its kernfs node id, which
// the tracker's events and counts carry (kernel/cgroup/cgroup.c
// cgroup_id()). Ids are 64-bit and not reused within a boot.
func CgroupID(dir string) (uint64, error) {
	h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, dir, 0)
	if err == nil && h.Type() == fileidKernfs && h.Size() == 8 {
		return binary.LittleEndian.Uint64(h.Bytes()), nil
	}
	// Without file handle support kernfs's inode number is the same id on
	// 64-bit kernels (fs/kernfs/kernfs-internal.h, kernfs_ino()).
	var st unix.Stat_t
	if serr := unix.Stat(dir, &st); serr != nil {
		return 0, fmt.Errorf("cgroup id of %s: %w", dir, serr)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return 0, fmt.Errorf("cgroup id of %s: not a directory", dir)
	}
	return st.Ino, nil
}

// CgroupDir returns the directory of the cgroup id beneath the hierarchy
// mounted at mount, the inverse of CgroupID: open_by_handle_at(2) with the
// kernfs handle on the mount's root, then the fd's /proc/self/fd link. It
// needs CAP_DAC_READ_SEARCH, and fails with an error wrapping unix.ESTALE
// once the cgroup is removed.
func CgroupDir(mount string, id uint64) (string, error) {
	// An O_PATH mount fd gives EBADF: the root is opened for reading.
	m, err := os.OpenFile(mount, os.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("cgroup %d: %w", id, err)
	}
	defer m.Close()
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, id)
	fd, err := unix.OpenByHandleAt(int(m.Fd()), unix.NewFileHandle(fileidKernfs, b), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return "", fmt.Errorf("cgroup %d under %s: open_by_handle_at: %w", id, mount, err)
	}
	defer unix.Close(fd)
	dir, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return "", fmt.Errorf("cgroup %d under %s: %w", id, mount, err)
	}
	// The link is relative to this process's root; under a cgroup
	// namespace or a mount of a subtree it still names the directory.
	return filepath.Clean(dir), nil
}
