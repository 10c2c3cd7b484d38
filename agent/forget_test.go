package agent

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/overrides"
	"github.com/memcgd/memcgd/state"
)

// A cgroup removed after the daemon has observed it, whether a leaf or a
// parent with its child, is forgotten: no status, and no cached reading
// of it as an ancestor (issue 9, defect 11: the cache kept removed
// parents).
func TestAgentForgetsRemovedCgroups(t *testing.T) {
	dirty := memcg.Stat{Limit: 100 * mib, Usage: 60 * mib, File: 50 * mib, Dirty: 20 * mib}
	tests := []struct {
		name   string
		remove []host.Cgroup // children first
	}{
		{"leaf", []host.Cgroup{"/b"}},
		{"parent and child", []host.Cgroup{"/p/c", "/p"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newFakeHost(map[host.Cgroup]memcg.Stat{"/": root, "/a": dirty, "/b": dirty, "/p": dirty, "/p/c": dirty})
			a, stop := startAgent(t, Options{Host: h, Config: config.Default()})
			defer stop()
			if !waitFor(5*time.Second, func() bool {
				for _, cg := range tt.remove {
					if _, observed := managedNow(a, cg); !observed || h.count(h.writeOut, cg) == 0 {
						return false
					}
				}
				return true
			}) {
				t.Fatalf("%v not observed and written out within 5 s", tt.remove)
			}
			for _, cg := range tt.remove {
				h.remove(cg)
			}
			if !waitFor(5*time.Second, func() bool {
				for _, cg := range tt.remove {
					if managed, _ := managedNow(a, cg); managed {
						return false
					}
				}
				return true
			}) {
				t.Fatalf("%v removed, still listed 5 s later", tt.remove)
			}
			a.ancMu.Lock()
			defer a.ancMu.Unlock()
			for _, cg := range tt.remove {
				if _, ok := a.ancestors[cg]; ok {
					t.Errorf("%s removed and forgotten, still cached as an ancestor", cg)
				}
			}
			if _, err := a.Status("/a"); err != nil {
				t.Errorf("/a, still there: %v", err)
			}
		})
	}
}

// Issue 9, defect 11: a cgroup removed and created again at the same path
// while a step or a pause of the old one is in flight. The old state's
// result, when it comes, is dropped: it neither forgets the new state nor
// steps the old one again.
func TestAgentKeepsTheStateOfARecreatedCgroup(t *testing.T) {
	tests := []struct {
		call string
		old  memcg.Stat // the removed cgroup: it wants that call
	}{
		// The write-out fails as vanished when it returns: its files
		// were the old cgroup's.
		{"write out", memcg.Stat{Limit: 100 * mib, Usage: 60 * mib, File: 50 * mib, Dirty: 20 * mib}},
		{"pause", memcg.Stat{Limit: 1 << 30, Usage: 100 * mib, File: 100 * mib, Writeback: 17 * mib}},
	}
	// The new cgroup is idle: nothing but a scan or an event steps it.
	idle := memcg.Stat{Limit: 100 * mib, Usage: 10 * mib, File: 5 * mib}
	for _, tt := range tests {
		t.Run(tt.call, func(t *testing.T) {
			h := newFakeHost(map[host.Cgroup]memcg.Stat{"/": root, "/a": tt.old})
			entered, release := h.hold(t, "/a", tt.call)
			cfg := config.Default()
			cfg.Defaults = memcg.Knobs{DirtyBytes: 16 * mib, DirtyBackgroundBytes: 8 * mib}
			// Scans only when asked.
			a, stop := startAgent(t, Options{Host: h, Config: cfg, Workers: 2, ScanInterval: time.Hour})
			defer stop()
			defer release()
			select {
			case <-entered:
			case <-time.After(5 * time.Second):
				t.Fatalf("no %s of /a within 5 s", tt.call)
			}
			h.remove("/a")
			a.requestScan()
			if !waitFor(5*time.Second, func() bool { managed, _ := managedNow(a, "/a"); return !managed }) {
				t.Fatal("/a removed, still listed after a scan")
			}
			h.add("/a", idle)
			a.requestScan()
			if !waitFor(5*time.Second, func() bool { _, observed := managedNow(a, "/a"); return observed }) {
				t.Fatal("/a created again, not observed after a scan")
			}
			// Let the new state's first step end: it is idle then.
			time.Sleep(20 * time.Millisecond)
			observes := h.count(h.observes, "/a")
			release()
			for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
				if managed, _ := managedNow(a, "/a"); !managed {
					t.Fatalf("the old state's %s ended and the new state of /a was forgotten", tt.call)
				}
			}
			if n := h.count(h.observes, "/a") - observes; n != 0 {
				t.Errorf("the old state's %s ended and /a was observed %d more times: the old state was stepped again", tt.call, n)
			}
		})
	}
}

// Issue 9, defect 11: the runtime overrides of a removed cgroup are
// collected when the agent forgets it, so that a cgroup created again
// under the same path does not inherit them; a sibling's stay.
func TestAgentForgetsTheOverridesOfARemovedCgroup(t *testing.T) {
	ov, err := overrides.Load(filepath.Join(t.TempDir(), "overrides.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := newFakeHost(map[host.Cgroup]memcg.Stat{"/": root, "/a": {Limit: 100 * mib}, "/b": {Limit: 100 * mib}})
	for _, cg := range []host.Cgroup{"/a", "/b"} {
		if err := ov.Set(cg, map[string]string{"dirty_bytes": "16M"}); err != nil {
			t.Fatal(err)
		}
	}
	a, stop := startAgent(t, Options{Host: h, Config: config.Default(), Overrides: ov})
	defer stop()
	if !waitFor(5*time.Second, func() bool { _, observed := managedNow(a, "/b"); return observed }) {
		t.Fatal("/b not observed within 5 s")
	}
	h.remove("/b")
	a.requestScan()
	if !waitFor(5*time.Second, func() bool { managed, _ := managedNow(a, "/b"); return !managed }) {
		t.Fatal("/b removed, still managed 5 s later")
	}
	if got := ov.Get("/b"); len(got) != 0 {
		t.Errorf("overrides of removed /b = %v, want none", got)
	}
	if got := ov.Get("/a"); len(got) == 0 {
		t.Errorf("overrides of /a = %v, want its dirty_bytes kept", got)
	}
}

// Full flushes the host declines (rate-limited host-wide, nothing to
// flush) are counted apart, not as failed actions.
func TestAgentCountsRefusedFlushesApart(t *testing.T) {
	for _, refusal := range []error{host.ErrRateLimited, host.ErrNothingToFlush} {
		t.Run(refusal.Error(), func(t *testing.T) {
			// Reclaim meets dirty pages, too few for a targeted
			// write-out: seed 000's fallback, a full flush.
			wantsFlush := memcg.Stat{Limit: 500 * mib, Usage: 500*mib - 1*mib, File: 2 * mib, Dirty: 128 << 10, Anon: 500*mib - 3*mib}
			h := newFakeHost(map[host.Cgroup]memcg.Stat{"/": root, "/a": wantsFlush})
			h.flushErr = refusal
			a, stop := startAgent(t, Options{Host: h, Config: config.Default()})
			defer stop()
			var c state.Counters
			if !waitFor(5*time.Second, func() bool {
				st, err := a.Status("/a")
				if err != nil {
					return false
				}
				c = st[0].Counters
				return c.FlushesRefused > 0
			}) {
				t.Fatalf("no refused flush counted within 5 s: %+v (%d flushes asked)", c, h.count(h.flushes, "/a"))
			}
			if c.Errors != 0 {
				t.Errorf("Errors = %d for flushes refused with %v, want 0", c.Errors, refusal)
			}
		})
	}
}

// A cgroup the host keeps finding nothing to flush for (an anon-heavy
// tenant with no open file) is not asked about again at every step: each
// request lists its files in /proc. The requests back off from 1 s,
// doubling; a cgroup that keeps wanting a flush for 3 s is asked at most
// 3 times (at 0, 1 s, 3 s), against one per 50 ms step without the
// backoff.
func TestAgentBacksOffFlushesWithNothingToFlush(t *testing.T) {
	wantsFlush := memcg.Stat{Limit: 500 * mib, Usage: 500*mib - 1*mib, File: 2 * mib, Dirty: 128 << 10, Anon: 500*mib - 3*mib}
	h := newFakeHost(map[host.Cgroup]memcg.Stat{"/": root, "/a": wantsFlush})
	h.flushErr = host.ErrNothingToFlush
	_, stop := startAgent(t, Options{Host: h, Config: config.Default()})
	time.Sleep(3 * time.Second)
	stop()
	if n := h.count(h.flushes, "/a"); n == 0 || n > 3 {
		t.Errorf("%d flushes asked in 3 s with nothing to flush each time, want 1 to 3", n)
	}
}
