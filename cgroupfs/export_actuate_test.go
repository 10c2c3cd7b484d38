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

// RefusePSI makes w's PSI trigger writes fail with refuse(dir) for the
// cgroups at the directories where it returns an error.
func RefusePSI(w *Watcher, refuse func(dir string) error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	write := w.writeTrigger
	w.writeTrigger = func(dir string, fd int, b []byte) (int, error) {
		if err := refuse(dir); err != nil {
			return 0, err
		}
		return write(dir, fd, b)
	}
}

// SqueezeV1 and DirtyBytes are squeezeV1 and dirtyBytes.
var (
	SqueezeV1  = squeezeV1
	DirtyBytes = dirtyBytes
)
