package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/policy"
)

const mib = 1 << 20

// fakeHost is an in-memory kernel: reclaim lowers usage (clean file pages
// first), write-out and flush clean the dirty pages, pause records.
type fakeHost struct {
	mu       sync.Mutex
	stats    map[host.Cgroup]*memcg.Stat
	writeOut map[host.Cgroup]int
	flushes  map[host.Cgroup]int
	reclaims map[host.Cgroup]uint64
	pauses   map[host.Cgroup][]time.Duration
}

func newFakeHost(stats map[host.Cgroup]memcg.Stat) *fakeHost {
	f := &fakeHost{stats: map[host.Cgroup]*memcg.Stat{}, writeOut: map[host.Cgroup]int{},
		flushes: map[host.Cgroup]int{}, reclaims: map[host.Cgroup]uint64{}, pauses: map[host.Cgroup][]time.Duration{}}
	for cg, s := range stats {
		s := s
		f.stats[cg] = &s
	}
	return f
}

var _ host.Host = (*fakeHost)(nil)

func (f *fakeHost) Cgroups(ctx context.Context) ([]host.Cgroup, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []host.Cgroup
	for cg := range f.stats {
		out = append(out, cg)
	}
	return out, nil
}

func (f *fakeHost) Observe(ctx context.Context, cg host.Cgroup) (memcg.Stat, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.stats[cg]
	if !ok {
		return memcg.Stat{}, host.ErrVanished
	}
	return *s, nil
}

func (f *fakeHost) Reclaim(ctx context.Context, cg host.Cgroup, n uint64) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.stats[cg]
	if !ok {
		return 0, host.ErrVanished
	}
	clean := s.File - s.Dirty - s.Writeback
	got := min(n, clean)
	if got == 0 {
		return 0, host.ErrNothingReclaimed
	}
	s.File -= got
	s.Usage -= got
	f.reclaims[cg] += got
	return got, nil
}

func (f *fakeHost) WriteOut(ctx context.Context, cg host.Cgroup) (host.WriteOut, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.stats[cg]
	if !ok {
		return host.WriteOut{}, host.ErrVanished
	}
	f.writeOut[cg]++
	w := host.WriteOut{Files: 1, Bytes: s.Dirty}
	s.Dirty = 0
	return w, nil
}

func (f *fakeHost) Flush(ctx context.Context, cg host.Cgroup) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flushes[cg]++
	for _, s := range f.stats {
		s.Dirty = 0
	}
	return nil
}

func (f *fakeHost) Pause(ctx context.Context, cg host.Cgroup, d time.Duration) error {
	f.mu.Lock()
	f.pauses[cg] = append(f.pauses[cg], d)
	f.mu.Unlock()
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	return nil
}

func (f *fakeHost) Now() time.Time { return time.Now() }

func (f *fakeHost) set(cg host.Cgroup, fn func(*memcg.Stat)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f.stats[cg])
}

func (f *fakeHost) remove(cg host.Cgroup) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.stats, cg)
}

// root is a 16 GiB machine with 8 GiB free.
var root = memcg.Stat{Limit: 16 << 30, Usage: 8 << 30, File: 4 << 30}

// runAgent runs an agent over h until cond holds or a deadline passes.
func runAgent(t *testing.T, h *fakeHost, cfg *config.Config, workers int, cond func(*Agent) bool) *Agent {
	t.Helper()
	a, err := New(Options{Host: h, Config: cfg, Workers: workers, ActiveInterval: 5 * time.Millisecond,
		ScanInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- a.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for !cond(a) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !cond(a) {
		t.Fatal("condition not reached within 5 s")
	}
	return a
}

func (f *fakeHost) count(m map[host.Cgroup]int, cg host.Cgroup) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return m[cg]
}

func TestAgentWritesOutPastDirtyBackground(t *testing.T) {
	h := newFakeHost(map[host.Cgroup]memcg.Stat{
		"/":  root,
		"/a": {Limit: 100 * mib, Usage: 60 * mib, File: 50 * mib, Dirty: 20 * mib}, // default bg 5 % of ~90M
		"/b": {Limit: 100 * mib, Usage: 60 * mib, File: 50 * mib, Dirty: 1 * mib},
	})
	a := runAgent(t, h, config.Default(), 2, func(*Agent) bool { return h.count(h.writeOut, "/a") > 0 })
	if n := h.count(h.writeOut, "/b"); n != 0 {
		t.Errorf("/b, below its background threshold, was written out %d times", n)
	}
	if n := h.count(h.flushes, "/a"); n != 0 {
		t.Errorf("background write-out flushed everything %d times", n)
	}
	st, err := a.Status("/a")
	if err != nil || st[0].Counters.WriteOuts == 0 || st[0].Counters.WriteOutBytes != 20*mib {
		t.Errorf("Status(/a) = %+v, %v", st, err)
	}
}

func TestAgentBackgroundReclaim(t *testing.T) {
	// seed 001: below low_wmark the cgroup is reclaimed until free reaches
	// high_wmark, in one run.
	limit := uint64(500 * mib)
	w := memcg.Knobs{MinFreeKbytes: memcg.MinFreeAuto}.Watermarks(limit)
	h := newFakeHost(map[host.Cgroup]memcg.Stat{
		"/":  root,
		"/a": {Limit: limit, Usage: limit - 1*mib, File: 400 * mib},
	})
	free := func() uint64 {
		s, _ := h.Observe(context.Background(), "/a")
		return s.Free()
	}
	a := runAgent(t, h, config.Default(), 1, func(*Agent) bool { return free() >= w.High })
	st, _ := a.Status("/a")
	c := st[0].Counters
	if c.ReclaimRuns != 1 {
		t.Errorf("pgoutrun = %d, want one run from low to high", c.ReclaimRuns)
	}
	if want := w.High - 1*mib; c.ReclaimedBytes != want {
		t.Errorf("kswapd_steal bytes = %d, want high - free = %d", c.ReclaimedBytes, want)
	}
	if free() > w.High {
		t.Errorf("reclaimed past the high watermark: free %d > %d", free(), w.High)
	}
}

func TestAgentReclaimWritesBackOwnFilesFirst(t *testing.T) {
	limit := uint64(500 * mib)
	h := newFakeHost(map[host.Cgroup]memcg.Stat{
		"/": root,
		// Below low_wmark, its page cache mostly dirty (though under its
		// 5 % background): reclaim cannot be met from clean pages.
		"/a": {Limit: limit, Usage: limit - 1*mib, File: 2 * mib, Dirty: 1 * mib, Anon: limit - 3*mib},
	})
	runAgent(t, h, config.Default(), 1, func(*Agent) bool { return h.count(h.writeOut, "/a") > 0 })
	if n := h.count(h.flushes, "/a"); n != 0 {
		t.Errorf("seed 000: a cgroup with 256 dirty pages was flushed %d times", n)
	}
}

func TestAgentLeavesUnlimitedCgroupsAlone(t *testing.T) {
	h := newFakeHost(map[host.Cgroup]memcg.Stat{
		"/":  root,
		"/u": {Limit: memcg.NoLimit, Usage: 6 << 30, File: 6 << 30, Dirty: 3 << 30},
	})
	runAgent(t, h, config.Default(), 1, func(a *Agent) bool {
		st, err := a.Status("/u")
		return err == nil && !st[0].Observed.IsZero()
	})
	if n := h.count(h.writeOut, "/u"); n != 0 {
		t.Errorf("limited_only: an unlimited cgroup was written out %d times", n)
	}
}

func TestAgentSkipsVanishedCgroups(t *testing.T) {
	h := newFakeHost(map[host.Cgroup]memcg.Stat{
		"/":  root,
		"/a": {Limit: 100 * mib, Usage: 60 * mib, File: 50 * mib, Dirty: 20 * mib},
		"/b": {Limit: 100 * mib, Usage: 60 * mib, File: 50 * mib, Dirty: 20 * mib},
	})
	h.remove("/b") // listed by nobody now, but make Observe fail for a stale name too
	a := runAgent(t, h, config.Default(), 1, func(*Agent) bool { return h.count(h.writeOut, "/a") > 0 })
	if _, err := a.Status("/b"); err == nil {
		t.Error("a vanished cgroup is still listed")
	}
}

func TestAgentIsFairAcrossCgroups(t *testing.T) {
	// One worker, two cgroups needing many reclaim steps each: both make
	// progress in turn rather than one finishing first.
	limit := uint64(1 << 30)
	h := newFakeHost(map[host.Cgroup]memcg.Stat{
		"/":  root,
		"/a": {Limit: limit, Usage: limit, File: limit},
		"/b": {Limit: limit, Usage: limit, File: limit},
	})
	cfg := config.Default()
	cfg.Defaults.MinFreeKbytes = 64 << 10 // 64 MiB min: high is 96 MiB, 12 steps of 8 MiB
	runAgent(t, h, cfg, 1, func(*Agent) bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.reclaims["/a"] >= 32*mib || h.reclaims["/b"] >= 32*mib
	})
	h.mu.Lock()
	ra, rb := h.reclaims["/a"], h.reclaims["/b"]
	h.mu.Unlock()
	if ra < 16*mib || rb < 16*mib {
		t.Errorf("unfair: /a reclaimed %d MiB, /b %d MiB", ra/mib, rb/mib)
	}
}

func TestAgentThrottlesPastFreerun(t *testing.T) {
	cfg := config.Default()
	cfg.Defaults = memcg.Knobs{DirtyBytes: 16 * mib, DirtyBackgroundBytes: 8 * mib, MinFreeKbytes: 0, WritebackFirst: true}
	h := newFakeHost(map[host.Cgroup]memcg.Stat{
		"/":  root,
		"/a": {Limit: 1 << 30, Usage: 100 * mib, File: 100 * mib, Writeback: 17 * mib}, // past the limit, all under writeback
	})
	runAgent(t, h, cfg, 1, func(*Agent) bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.pauses["/a"]) >= 2
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	// 17 MiB under writeback, freerun 12 MiB: 5 MiB at the initial
	// 100 MiB/s bandwidth estimate drain in 50 ms.
	for _, p := range h.pauses["/a"] {
		if want := policy.DrainPause(17*mib, 12*mib, policy.InitBW); p != want {
			t.Errorf("pause %v past the limit, want %v", p, want)
		}
	}
}

func TestWakeAt(t *testing.T) {
	e := memcg.Effective{
		Dirty:      memcg.DirtyLimits{Background: 8 * mib, Limit: 16 * mib},
		Watermarks: memcg.Watermarks{Min: 4 * mib, Low: 5 * mib, High: 6 * mib},
	}
	tests := []struct {
		name string
		s    memcg.Stat
		want uint64
	}{
		{"dirty background is nearer", memcg.Stat{Limit: 100 * mib, Usage: 10 * mib, Dirty: 2 * mib}, 16 * mib},
		{"low watermark is nearer", memcg.Stat{Limit: 100 * mib, Usage: 90 * mib}, 95 * mib},
		{"no limit: dirty only", memcg.Stat{Limit: memcg.NoLimit, Usage: 10 * mib}, 18 * mib},
	}
	for _, tt := range tests {
		if got := wakeAt(tt.s, e); got != tt.want {
			t.Errorf("%s: wakeAt = %d MiB, want %d MiB", tt.name, got/mib, tt.want/mib)
		}
	}
}
