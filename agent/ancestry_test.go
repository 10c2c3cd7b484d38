package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// observeHost is a host whose Observe counts the reads of each cgroup and
// can be held back, and whose clock the test sets. Only Observe and Now
// are called by ancestry.
type observeHost struct {
	host.Host
	mu    sync.Mutex
	now   time.Time
	reads map[host.Cgroup]int
	file  uint64        // the File every reading reports
	gate  chan struct{} // non-nil: reads of ancestors wait on it
}

func (h *observeHost) Now() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

func (h *observeHost) Observe(ctx context.Context, cg host.Cgroup) (memcg.Stat, error) {
	h.mu.Lock()
	h.reads[cg]++
	gate, file := h.gate, h.file
	h.mu.Unlock()
	if gate != nil && cg != "/a/b" {
		<-gate
	}
	return memcg.Stat{File: file, Limit: memcg.NoLimit}, nil
}

func (h *observeHost) count(cg host.Cgroup) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reads[cg]
}

// The specification of the ancestors' cache: a step reads its own cgroup
// always; an ancestor read within ActiveInterval is reused; one read
// within StaleAncestor is reused too and read again off the step (a slow
// read of the root must not hold a throttled writer's step); an older one
// is read on the step.
func TestAncestryReusesStaleAncestorsAndRefreshesThemOffTheStep(t *testing.T) {
	t0 := time.Unix(1000, 0)
	h := &observeHost{now: t0, reads: map[host.Cgroup]int{}, file: 1}
	a, err := New(Options{Host: h, Config: config.Default(), ActiveInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	step := func() []memcg.Stat {
		t.Helper()
		chain, _, err := a.ancestry(ctx, "/a/b")
		if err != nil {
			t.Fatal(err)
		}
		return chain
	}
	set := func(d time.Duration) {
		h.mu.Lock()
		h.now = t0.Add(d)
		h.mu.Unlock()
	}

	step()
	if h.count("/") != 1 || h.count("/a") != 1 || h.count("/a/b") != 1 {
		t.Fatalf("first step: reads / %d, /a %d, /a/b %d; want 1 each", h.count("/"), h.count("/a"), h.count("/a/b"))
	}
	set(10 * time.Millisecond)
	step()
	if h.count("/") != 1 || h.count("/a/b") != 2 {
		t.Fatalf("within ActiveInterval: reads / %d, /a/b %d; want 1 and 2", h.count("/"), h.count("/a/b"))
	}

	// Stale but within StaleAncestor: the step must not wait for the
	// ancestors' reads, which are held back until after it returns.
	h.mu.Lock()
	h.gate, h.file = make(chan struct{}), 2
	h.mu.Unlock()
	set(500 * time.Millisecond)
	done := make(chan []memcg.Stat)
	go func() {
		chain, _, _ := a.ancestry(ctx, "/a/b")
		done <- chain
	}()
	var chain []memcg.Stat
	select {
	case chain = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a step with stale ancestors waited for their reads")
	}
	if chain[0].File != 1 || chain[2].File != 2 {
		t.Errorf("stale step: root File %d, self File %d; want the old reading (1) and a new one (2)", chain[0].File, chain[2].File)
	}
	close(h.gate)
	a.running.Wait()
	if h.count("/") != 2 || h.count("/a") != 2 {
		t.Errorf("after the refresh: reads / %d, /a %d; want 2 each (one refresh each, off the step)", h.count("/"), h.count("/a"))
	}
	h.mu.Lock()
	h.gate = nil
	h.mu.Unlock()
	if chain := step(); chain[0].File != 2 {
		t.Errorf("after the refresh: root File %d, want the refreshed reading (2)", chain[0].File)
	}

	// Older than StaleAncestor since the refresh: read on the step.
	set(500*time.Millisecond + StaleAncestor)
	h.mu.Lock()
	h.file = 3
	h.mu.Unlock()
	if chain := step(); chain[0].File != 3 || h.count("/") != 3 {
		t.Errorf("past StaleAncestor: root File %d after %d reads; want 3 after 3 (read on the step)", chain[0].File, h.count("/"))
	}
}
