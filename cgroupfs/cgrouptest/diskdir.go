package cgrouptest

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// DiskDir returns a temporary directory on a disk filesystem: the page
// cache of tmpfs and ramfs is shared memory, never dirty in memory.stat
// and never written out, so write-out, reclaim and dirty tracking have
// nothing to act on there. Such a directory fails the test in CI
// (CI=true) and skips it elsewhere.
func DiskDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC {
		msg := "test needs page cache on a disk filesystem; " + dir + " is on tmpfs (set TMPDIR to a disk)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dir
}
