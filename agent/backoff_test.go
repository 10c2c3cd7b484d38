package agent

import (
	"testing"
	"time"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// The backoff's specification, one attempt at a time.
func TestReclaimBackoff(t *testing.T) {
	const base = 10 * time.Millisecond
	const step = 8 * mib
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	file := func(n uint64) memcg.Stat { return memcg.Stat{File: n} }
	type op struct {
		at     time.Duration
		s      memcg.Stat
		want   bool // allow's answer
		failed bool // the outcome recorded when allowed
	}
	tests := []struct {
		name string
		ops  []op
	}{
		{"the first attempt is allowed", []op{{0, file(0), true, false}}},
		{"a failure waits base, then twice as long", []op{
			{0, file(0), true, true},
			{base - 1, file(0), false, false},
			{base, file(0), true, true},
			{base + 2*base - 1, file(0), false, false},
			{base + 2*base, file(0), true, true},
		}},
		{"a success ends the backoff", []op{
			{0, file(0), true, true},
			{base, file(0), true, false},
			{base + 1, file(0), true, true},
			{base + 1 + base - 1, file(0), false, false},
		}},
		{"page cache grown by a step ends it", []op{
			{0, file(4 * mib), true, true},
			{1, file(4*mib + step - 1), false, false},
			{2, file(4*mib + step), true, true},
			{3, file(4*mib + step), false, false}, // a new backoff, from base
			{2 + base, file(4*mib + step), true, false},
		}},
		{"anonymous growth does not end it", []op{
			{0, memcg.Stat{Anon: 10 * mib}, true, true},
			{1, memcg.Stat{Anon: 100 * mib, Usage: 100 * mib}, false, false},
		}},
	}
	for _, tt := range tests {
		var b reclaimBackoff
		for i, o := range tt.ops {
			got := b.allow(at(o.at), o.s, step)
			if got != o.want {
				t.Errorf("%s: op %d at +%v: allow = %v, want %v", tt.name, i, o.at, got, o.want)
			}
			if got {
				b.record(at(o.at), o.s, o.failed, base)
			}
		}
	}
}

func TestBackoffDelay(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want time.Duration
	}{{1, 50 * time.Millisecond}, {2, 100 * time.Millisecond}, {4, 400 * time.Millisecond},
		{10, 25600 * time.Millisecond}, {11, MaxReclaimBackoff}, {1000, MaxReclaimBackoff}} {
		if got := backoffDelay(tt.n, 50*time.Millisecond); got != tt.want {
			t.Errorf("backoffDelay(%d, 50ms) = %v, want %v", tt.n, got, tt.want)
		}
	}
}

// Issue 9, defect 3: a cgroup below its low watermark with nothing
// reclaimable (anonymous memory without swap) is not asked to reclaim at
// every step: the attempts back off exponentially, the cgroup waits idle,
// anonymous growth does not end the wait, and new page cache does.
func TestAgentBacksOffWhenReclaimFindsNothing(t *testing.T) {
	const active = 5 * time.Millisecond
	// min_free_kbytes 128M: low 160 MiB, high 192 MiB; 64 MiB free.
	anon := memcg.Stat{Limit: 1 << 30, Usage: 1<<30 - 64*mib, Anon: 1<<30 - 64*mib}
	h := newFakeHost(map[host.Cgroup]memcg.Stat{"/": root, "/a": anon})
	h.watcher = newFakeWatcher()
	cfg := config.Default()
	cfg.Defaults.MinFreeKbytes = 128 << 10
	_, stop := startAgent(t, Options{Host: h, Watcher: h.watcher, Config: cfg, ActiveInterval: active,
		ScanInterval: time.Hour})
	defer stop()
	attempts := func() int { return h.count(h.attempts, "/a") }

	// Eight failed attempts, each after twice the wait of the one
	// before: at least 5+10+...+640 ms apart in all. Without a backoff
	// they come one step (5 ms) apart.
	const n = 8
	start := time.Now()
	if !waitFor(10*time.Second, func() bool { return attempts() >= n }) {
		t.Fatalf("%d reclaim attempts in 10 s, want %d", attempts(), n)
	}
	took := time.Since(start)
	var want time.Duration
	for i := 1; i < n; i++ {
		want += backoffDelay(i, active)
	}
	if took < want {
		t.Errorf("%d attempts that found nothing took %v, want at least %v: no backoff", n, took, want)
	}
	t.Logf("%d attempts in %v (backoff sum %v)", n, took.Round(time.Millisecond), want)

	// The next attempt is due backoffDelay(8) = 1.28 s after the last.
	// Anonymous growth wakes the cgroup (its watch) but is no reason to
	// try again.
	before := attempts()
	h.set("/a", func(s *memcg.Stat) { s.Anon += 16 * mib; s.Usage += 16 * mib })
	time.Sleep(100 * time.Millisecond)
	if got := attempts(); got != before {
		t.Errorf("anonymous growth: %d more reclaim attempts, want none until the backoff ends", got-before)
	}
	// New page cache is: reclaim is tried, and takes it, at once.
	h.set("/a", func(s *memcg.Stat) { s.File += 16 * mib; s.Usage += 16 * mib })
	if !waitFor(500*time.Millisecond, func() bool { return attempts() > before }) {
		t.Errorf("16 MiB of new page cache: no reclaim attempt within 500 ms, want one at once")
	}
	if !waitFor(500*time.Millisecond, func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.reclaims["/a"] > 0 }) {
		t.Errorf("16 MiB of new page cache: nothing reclaimed")
	}
}
