package agent

import (
	"testing"
	"time"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
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
