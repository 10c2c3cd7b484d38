package cgroupfs

import (
	"time"

	"github.com/memcgd/memcgd/host"
)

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

// HoldV1Registrations makes w's v1 registrations, once made, wait until
// release is closed; each sends its directory on held first.
func HoldV1Registrations(w *Watcher, held chan<- string, release <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	register := w.register
	w.register = func(dir string, efd int, wake host.Wake) error {
		err := register(dir, efd, wake)
		held <- dir
		<-release
		return err
	}
}

// AwaitRearms waits until w has made, installed or given up every
// registration of a moved v1 threshold asked for so far.
func AwaitRearms(w *Watcher) {
	for {
		w.mu.Lock()
		n := len(w.rearm) + w.rearming
		w.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
