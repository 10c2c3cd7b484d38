package watch

import (
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/layout"
)

// The Watcher's loop waits for its epoll set on the runtime's poller
// (internal/pollfd), and Close still stops it at once.
func TestWatcherLoopWaitsOnThePoller(t *testing.T) {
	w, err := NewWatcher(layout.Layout{}, WatcherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w.poll == nil {
		t.Error("the Watcher's epoll set is not on the runtime's poller: its loop blocks in epoll_wait")
	}
	time.Sleep(10 * time.Millisecond) // the loop parked
	closed := make(chan error, 1)
	go func() { closed <- w.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return within 5s: the loop was not woken")
	}
}
