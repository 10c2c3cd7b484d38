package cgroupfs_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/host"
)

// Moving the usage threshold of a v1 watch registers it anew, and the
// kernel's registration waits for an RCU grace period (7 to 111 ms on a
// loaded host). Watch returns without waiting for it, the Watcher's lock,
// which the eBPF tracker's wake-ups take, stays free meanwhile, and the
// moved threshold then works, for a crossing made while its registration
// was held too.
func TestWatchMovesAV1ThresholdWithoutWaitingForTheKernel(t *testing.T) {
	l := cgrouptest.Layout(t)
	if l.Memory.Version != cgroupfs.V1 {
		t.Skip("v1 registrations: a v2 usage threshold is a poll, moved at once")
	}
	c := cgrouptest.New(t, l, 256*watchMiB)
	w := newWatcher(t, l, cgroupfs.WatcherOptions{})
	before := watchUsage(t, l, c.Dir)
	if err := w.Watch(c.Path, host.Wake{UsageAbove: before + 128*watchMiB}); err != nil {
		t.Fatal(err)
	}
	held, release := make(chan string, 1), make(chan struct{})
	cgroupfs.HoldV1Registrations(w, held, release)
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()

	returned := make(chan error, 1)
	go func() { returned <- w.Watch(c.Path, host.Wake{UsageAbove: before + 8*watchMiB}) }()
	select {
	case <-held:
	case <-time.After(5 * time.Second):
		t.Fatal("the moved threshold was not registered within 5 s")
	}
	select {
	case err := <-returned:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Watch waits for the kernel's registration of the moved threshold")
	}
	locked := make(chan int, 1)
	go func() { locked <- w.Len() }() // Len takes the Watcher's lock
	select {
	case n := <-locked:
		if n != 1 {
			t.Errorf("Len() = %d, want 1", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the Watcher's lock is held while the kernel registers the moved threshold")
	}

	cgrouptest.DirtyFile(t, c, filepath.Join(diskDir(t), "data"), 32*watchMiB)
	close(release)
	released = true
	if !awaitReport(w, c.Path, reportWithin(l, 0)) {
		t.Errorf("usage %d MiB over the moved threshold, crossed while its registration was held, was not reported",
			(watchUsage(t, l, c.Dir)-before)/watchMiB)
	}
}

// A threshold moved again before the kernel registered the one before it
// leaves no file descriptor behind: each registration overtaken is closed
// unused, and the watch holds its one eventfd.
func TestWatchMovedOftenHoldsOneEventfd(t *testing.T) {
	l := cgrouptest.Layout(t)
	if l.Memory.Version != cgroupfs.V1 {
		t.Skip("v1 registrations: a v2 usage threshold is a poll, moved at once")
	}
	c := cgrouptest.New(t, l, 256*watchMiB)
	w := newWatcher(t, l, cgroupfs.WatcherOptions{})
	before := watchUsage(t, l, c.Dir)
	if err := w.Watch(c.Path, host.Wake{UsageAbove: before + 128*watchMiB}); err != nil {
		t.Fatal(err)
	}
	armed := openFiles(t)
	const moves = 50
	for i := range moves {
		if err := w.Watch(c.Path, host.Wake{UsageAbove: before + uint64(64+i)*watchMiB}); err != nil {
			t.Fatal(err)
		}
	}
	cgroupfs.AwaitRearms(w)
	if got := openFiles(t); got != armed {
		t.Errorf("%d file descriptors open after %d moves of the threshold were registered, want %d as before them", got, moves, armed)
	}
	// The last threshold is the one in force: a write that crosses it
	// is reported.
	cgrouptest.DirtyFile(t, c, filepath.Join(diskDir(t), "data"), 128*watchMiB)
	if !awaitReport(w, c.Path, reportWithin(l, 0)) {
		t.Errorf("usage %d MiB over the threshold before the moves: the last moved threshold (%d MiB) was not reported",
			(watchUsage(t, l, c.Dir)-before)/watchMiB, 64+moves-1)
	}
}
