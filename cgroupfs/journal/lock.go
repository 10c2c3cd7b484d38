package journal

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/format"
)

// locksFile lists the file locks in force (fs/locks.c, locks_show).
const locksFile = "/proc/locks"

// lockedError says who holds the journal's lock: the flock(2) on its
// directory dir, which is not an fcntl lock, so F_GETLK and F_OFD_GETLK
// do not see it (fs/locks.c keeps the two apart); /proc/locks lists it
// with its holder's pid.
func lockedError(path string, dir *os.File) error {
	const hint = "(another memcgd running?)"
	if pid, ok := lockHolder(dir); ok {
		return fmt.Errorf("journal %s: %s locked by pid %d %s", path, dir.Name(), pid, hint)
	}
	return fmt.Errorf("journal %s: %s locked by another process %s", path, dir.Name(), hint)
}

// lockHolder returns the pid that holds the flock on dir, if /proc/locks
// names one.
func lockHolder(dir *os.File) (int, bool) {
	var st unix.Stat_t
	if err := unix.Fstat(int(dir.Fd()), &st); err != nil {
		return 0, false
	}
	b, err := os.ReadFile(locksFile)
	if err != nil {
		return 0, false
	}
	return flockHolder(b, st.Dev, st.Ino)
}

// flockHolder finds in the text of /proc/locks the process holding a
// flock on the file with device dev and inode ino. A lock whose holder is
// not in the reader's pid namespace is not listed; one listed with pid 0
// or less (none) is no answer.
func flockHolder(locks []byte, dev, ino uint64) (int, bool) {
	pid := 0
	err := format.ParseLocks(locks, func(l format.Lock) {
		if pid == 0 && !l.Blocked && l.Class == "FLOCK" && l.HasInode && l.Inode == ino &&
			l.Major == unix.Major(dev) && l.Minor == unix.Minor(dev) && l.PID > 0 {
			pid = l.PID
		}
	})
	return pid, err == nil && pid > 0
}
