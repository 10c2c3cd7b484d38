package dirtytrack

import (
	"os"
	"testing"
)

// Both of the tracker's rings wait on the runtime's poller on the kernels
// the project runs on (a ring buffer map's descriptor takes epoll), so
// that neither reader holds a P while it waits; the tests that read
// wake-ups and cgroup events show that records still arrive.
func TestRingsWaitOnThePoller(t *testing.T) {
	tr, err := Load(Options{})
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("load: %v", err)
		}
		t.Skipf("load: %v", err)
	}
	defer tr.Close()
	if len(tr.rings) != 2 {
		t.Fatalf("%d rings, want 2 (wake-ups, cgroup events)", len(tr.rings))
	}
	for i, r := range tr.rings {
		if r.poll == nil {
			t.Errorf("ring %d is not on the runtime's poller: its reader blocks in epoll_wait", i)
		}
	}
}
