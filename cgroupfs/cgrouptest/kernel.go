package cgrouptest

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// KernelAtLeast reports the running kernel's release (uname -r) and
// whether its version is major.minor or later. A release whose version
// does not parse counts as older.
func KernelAtLeast(t testing.TB, major, minor int) (release string, ok bool) {
	t.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatalf("uname: %v", err)
	}
	release = unix.ByteSliceToString(u.Release[:])
	var ma, mi int
	if _, err := fmt.Sscanf(release, "%d.%d", &ma, &mi); err != nil {
		return release, false
	}
	return release, ma > major || ma == major && mi >= minor
}
