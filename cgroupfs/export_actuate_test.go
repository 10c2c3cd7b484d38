package cgroupfs

import "time"

// Exported for the real-kernel tests of write-out and flush, which live in
// package cgroupfs_test.

// WithSyncfs returns o with syncfs(2) replaced by f.
func WithSyncfs(o FlushOptions, f func(fd int) error) FlushOptions {
	o.syncfs = f
	return o
}

// WithClock returns o with the clock replaced by now.
func WithClock(o FlushOptions, now func() time.Time) FlushOptions {
	o.now = now
	return o
}
