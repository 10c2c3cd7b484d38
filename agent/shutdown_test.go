package agent

import (
	"context"
	"testing"
	"time"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// Issue 9, defect 4: Run returns within its StopTimeout of its context's
// end even when a host call never returns (a syscall stuck on a dead
// filesystem, a write the kernel parks), so that the daemon's undo runs.
func TestAgentRunReturnsWhileAHostCallIsStuck(t *testing.T) {
	const stopTimeout = 100 * time.Millisecond
	tests := []struct {
		call string
		s    memcg.Stat
	}{
		// Dirty past the background threshold.
		{"write out", memcg.Stat{Limit: 100 * mib, Usage: 60 * mib, File: 50 * mib, Dirty: 20 * mib}},
		// Below the low watermark, with clean pages.
		{"reclaim", memcg.Stat{Limit: 500 * mib, Usage: 500*mib - 1*mib, File: 400 * mib}},
		// Below the low watermark, with 32 dirty pages only: seed 000's
		// full flush.
		{"flush", memcg.Stat{Limit: 500 * mib, Usage: 500*mib - 1*mib, File: 2 * mib, Dirty: 128 << 10, Anon: 500*mib - 3*mib}},
		// Past the freerun ceiling, all under writeback.
		{"pause", memcg.Stat{Limit: 1 << 30, Usage: 100 * mib, File: 100 * mib, Writeback: 17 * mib}},
	}
	for _, tt := range tests {
		t.Run(tt.call, func(t *testing.T) {
			h := newFakeHost(map[host.Cgroup]memcg.Stat{"/": root, "/a": tt.s})
			entered, _ := h.hold(t, "/a", tt.call) // released at cleanup only
			cfg := config.Default()
			cfg.Defaults = memcg.Knobs{DirtyBytes: 16 * mib, DirtyBackgroundBytes: 8 * mib, MinFreeKbytes: memcg.MinFreeAuto}
			a, err := New(Options{Host: h, Config: cfg, Workers: 1, ActiveInterval: 5 * time.Millisecond, StopTimeout: stopTimeout})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- a.Run(ctx) }()
			select {
			case <-entered:
			case <-time.After(5 * time.Second):
				cancel()
				t.Fatalf("no %s of /a within 5 s", tt.call)
			}
			start := time.Now()
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
				t.Logf("Run returned %v after its context ended, with a %s stuck", time.Since(start).Round(time.Millisecond), tt.call)
			case <-time.After(5 * time.Second):
				t.Fatalf("Run has not returned 5 s after its context ended, with a %s stuck (StopTimeout %v)", tt.call, stopTimeout)
			}
		})
	}
}

// Issue 9, defect 3: a full flush, which waits for the device, never holds
// a worker: while one runs, the only worker goes on writing out another
// cgroup; and a second cgroup's flush is not started while one is in
// flight.
func TestAgentFlushHoldsNoWorker(t *testing.T) {
	wantsFlush := memcg.Stat{Limit: 500 * mib, Usage: 500*mib - 1*mib, File: 2 * mib, Dirty: 128 << 10, Anon: 500*mib - 3*mib}
	h := newFakeHost(map[host.Cgroup]memcg.Stat{"/": root, "/a": wantsFlush})
	entered, release := h.hold(t, "/a", "flush")
	_, stop := startAgent(t, Options{Host: h, Config: config.Default(), Workers: 1})
	defer stop()
	defer release() // before stop: the fake's flush ignores its context
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("no flush of /a within 5 s")
	}
	h.add("/b", memcg.Stat{Limit: 100 * mib, Usage: 60 * mib, File: 50 * mib, Dirty: 20 * mib})
	h.add("/c", wantsFlush)
	if !waitFor(5*time.Second, func() bool { return h.count(h.writeOut, "/b") > 0 }) {
		t.Errorf("/b was not written out while /a's flush ran: the flush holds the only worker")
	}
	// /c has been stepped by now (it was listed with /b) and wants a
	// flush every step.
	time.Sleep(50 * time.Millisecond)
	if n := h.count(h.flushes, "/c"); n != 0 {
		t.Errorf("/c was flushed %d times while /a's flush was in flight, want none", n)
	}
	release()
}
