package agent

import (
	"testing"
	"time"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// Issue 9, defect 1: the daemon never pauses nor reclaims a cgroup whose
// subtree holds it, in any hierarchy a pause goes through, and says so in
// its status; it still throttles and reclaims every other cgroup, its own
// cgroup's children included.
func TestAgentNeverThrottlesOrReclaimsItself(t *testing.T) {
	// Every cgroup wants both: 17 MiB under writeback is past the
	// 12 MiB freerun of dirty_bytes 16M, and 1 MiB free is below the
	// 80 MiB low watermark of min_free_kbytes 64M, with clean pages to
	// take.
	busy := memcg.Stat{Limit: 1 << 30, Usage: 1<<30 - 1*mib, File: 900 * mib, Writeback: 17 * mib}
	self := []host.Cgroup{"/a/b", "/u"} // memory /a/b; unified (or freezer) /u
	tests := []struct {
		cg     host.Cgroup
		exempt bool
	}{
		{"/a", true},      // an ancestor of the daemon's memory cgroup
		{"/a/b", true},    // the daemon's memory cgroup
		{"/u", true},      // the daemon's cgroup in another hierarchy: pausing /u freezes it
		{"/a/b/c", false}, // a child of the daemon's cgroup does not hold it
		{"/a/bc", false},  // a sibling whose name only starts alike
		{"/u/v", false},
		{"/x", false},
	}
	stats := map[host.Cgroup]memcg.Stat{"/": root}
	for _, tt := range tests {
		stats[tt.cg] = busy
	}
	h := newFakeHost(stats)
	cfg := config.Default()
	cfg.LimitedOnly = false
	cfg.Defaults = memcg.Knobs{DirtyBytes: 16 * mib, DirtyBackgroundBytes: 8 * mib, MinFreeKbytes: 64 << 10, WritebackFirst: true}
	a, stop := startAgent(t, Options{Host: h, Config: cfg, Self: self, Workers: 2})
	acted := func(cg host.Cgroup) bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.pauses[cg]) >= 2 && h.reclaims[cg] > 0
	}
	waitFor(5*time.Second, func() bool {
		for _, tt := range tests {
			if !tt.exempt && !acted(tt.cg) {
				return false
			}
		}
		return true
	})
	stop()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, tt := range append(tests, struct {
		cg     host.Cgroup
		exempt bool
	}{"/", true}) {
		paused, reclaimed := len(h.pauses[tt.cg]), h.reclaims[tt.cg]
		st, err := a.Status(tt.cg)
		if err != nil {
			t.Errorf("%s: %v", tt.cg, err)
			continue
		}
		if tt.exempt {
			if paused > 0 || reclaimed > 0 || h.attempts[tt.cg] > 0 {
				t.Errorf("%s holds the daemon (self %v), yet was paused %d times and reclaimed %d bytes in %d attempts",
					tt.cg, self, paused, reclaimed, h.attempts[tt.cg])
			}
			if st[0].Exempt != HoldsMemcgd {
				t.Errorf("%s: Status.Exempt = %q, want %q", tt.cg, st[0].Exempt, HoldsMemcgd)
			}
			continue
		}
		if paused < 2 || reclaimed == 0 {
			t.Errorf("%s does not hold the daemon, yet was paused %d times and reclaimed %d bytes", tt.cg, paused, reclaimed)
		}
		if st[0].Exempt != "" {
			t.Errorf("%s: Status.Exempt = %q, want none", tt.cg, st[0].Exempt)
		}
	}
}

func TestHoldsSelf(t *testing.T) {
	tests := []struct {
		cg   host.Cgroup
		self []host.Cgroup
		want bool
	}{
		{"/a", nil, false},
		{"/", nil, false},
		{"/", []host.Cgroup{"/"}, true},
		{"/", []host.Cgroup{"/a"}, true},
		{"/a", []host.Cgroup{"/a"}, true},
		{"/a", []host.Cgroup{"/a/b/c"}, true},
		{"/a/b/c", []host.Cgroup{"/a"}, false},
		{"/a", []host.Cgroup{"/ab"}, false},
		{"/ab", []host.Cgroup{"/a"}, false},
		{"/a", []host.Cgroup{"/x", "/a/"}, true},
	}
	for _, tt := range tests {
		if got := holdsSelf(tt.cg, tt.self); got != tt.want {
			t.Errorf("holdsSelf(%s, %v) = %v, want %v", tt.cg, tt.self, got, tt.want)
		}
	}
}
