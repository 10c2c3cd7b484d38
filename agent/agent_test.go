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
// first), write-out and flush clean the dirty pages, pause records. A call
// can be held (hold): it then blocks, whatever its context, until the test
// releases it.
type fakeHost struct {
	mu       sync.Mutex
	stats    map[host.Cgroup]*memcg.Stat
	writeOut map[host.Cgroup]int
	flushes  map[host.Cgroup]int
	reclaims map[host.Cgroup]uint64
	attempts map[host.Cgroup]int // Reclaim calls, successful or not
	observes map[host.Cgroup]int
	pauses   map[host.Cgroup][]time.Duration
	pausing  map[host.Cgroup]int // pauses in progress
	overlap  map[host.Cgroup]int // the most pauses of one cgroup at once
	holds    map[hold]*held
	watcher  *fakeWatcher // told of every change, when set
	flushErr error        // what Flush returns
}

// hold names a call of the fake host to one cgroup: "write out", "flush",
// "reclaim" or "pause".
type hold struct {
	cg   host.Cgroup
	call string
}

// held is a held call: entered is closed when the call starts, and the
// call returns once release is closed.
type held struct{ entered, release chan struct{} }

func newFakeHost(stats map[host.Cgroup]memcg.Stat) *fakeHost {
	f := &fakeHost{stats: map[host.Cgroup]*memcg.Stat{}, writeOut: map[host.Cgroup]int{},
		flushes: map[host.Cgroup]int{}, reclaims: map[host.Cgroup]uint64{}, attempts: map[host.Cgroup]int{},
		observes: map[host.Cgroup]int{}, pauses: map[host.Cgroup][]time.Duration{},
		pausing: map[host.Cgroup]int{}, overlap: map[host.Cgroup]int{}, holds: map[hold]*held{}}
	for cg, s := range stats {
		s := s
		f.stats[cg] = &s
	}
	return f
}

var _ host.Host = (*fakeHost)(nil)

// hold makes the next call to call on cg block until the returned
// release function is called; entered is closed once it has started. The
// test releases it at cleanup in any case.
func (f *fakeHost) hold(t *testing.T, cg host.Cgroup, call string) (entered <-chan struct{}, release func()) {
	h := &held{entered: make(chan struct{}), release: make(chan struct{})}
	f.mu.Lock()
	f.holds[hold{cg, call}] = h
	f.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(func() { close(h.release) }) }
	t.Cleanup(release)
	return h.entered, release
}

// wait blocks a call that is held, with f.mu not held. Caller holds f.mu,
// which is held again on return.
func (f *fakeHost) wait(cg host.Cgroup, call string) {
	h, ok := f.holds[hold{cg, call}]
	if !ok {
		return
	}
	delete(f.holds, hold{cg, call})
	f.mu.Unlock()
	close(h.entered)
	<-h.release
	f.mu.Lock()
}

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
	f.observes[cg]++
	s, ok := f.stats[cg]
	if !ok {
		return memcg.Stat{}, host.ErrVanished
	}
	return *s, nil
}

func (f *fakeHost) Reclaim(ctx context.Context, cg host.Cgroup, n uint64) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts[cg]++
	f.wait(cg, "reclaim")
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

// WriteOut cleans cg's dirty pages. One that was held fails as vanished if
// cg was removed meanwhile, even if a new cgroup took its path: the files
// it found belonged to the old one.
func (f *fakeHost) WriteOut(ctx context.Context, cg host.Cgroup) (host.WriteOut, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.stats[cg]
	if !ok {
		return host.WriteOut{}, host.ErrVanished
	}
	f.wait(cg, "write out")
	if f.stats[cg] != s {
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
	f.wait(cg, "flush")
	if f.flushErr != nil {
		return f.flushErr
	}
	for _, s := range f.stats {
		s.Dirty = 0
	}
	return nil
}

func (f *fakeHost) Pause(ctx context.Context, cg host.Cgroup, d time.Duration) error {
	f.mu.Lock()
	f.pauses[cg] = append(f.pauses[cg], d)
	f.pausing[cg]++
	f.overlap[cg] = max(f.overlap[cg], f.pausing[cg])
	f.wait(cg, "pause")
	f.mu.Unlock()
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	f.mu.Lock()
	f.pausing[cg]--
	f.mu.Unlock()
	return nil
}

func (f *fakeHost) Now() time.Time { return time.Now() }

// set changes cg's state, and reports it to the watcher if its usage rose
// above the watch.
func (f *fakeHost) set(cg host.Cgroup, fn func(*memcg.Stat)) {
	f.mu.Lock()
	fn(f.stats[cg])
	usage, w := f.stats[cg].Usage, f.watcher
	f.mu.Unlock()
	if w != nil {
		w.changed(cg, usage)
	}
}

// add creates cg, or replaces it by a new cgroup at the same path.
func (f *fakeHost) add(cg host.Cgroup, s memcg.Stat) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats[cg] = &s
}

func (f *fakeHost) remove(cg host.Cgroup) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.stats, cg)
}

// fakeWatcher reports a cgroup whose usage rose above its watch, as the
// real watchers' usage thresholds do.
type fakeWatcher struct {
	mu     sync.Mutex
	above  map[host.Cgroup]uint64
	events chan host.Cgroup
}

var _ host.Watcher = (*fakeWatcher)(nil)

func newFakeWatcher() *fakeWatcher {
	return &fakeWatcher{above: map[host.Cgroup]uint64{}, events: make(chan host.Cgroup, 16)}
}

func (w *fakeWatcher) Watch(cg host.Cgroup, wk host.Wake) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.above[cg] = wk.UsageAbove
	return nil
}

func (w *fakeWatcher) Unwatch(cg host.Cgroup) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.above, cg)
}

func (w *fakeWatcher) Events() <-chan host.Cgroup { return w.events }

func (w *fakeWatcher) Close() error { return nil }

func (w *fakeWatcher) changed(cg host.Cgroup, usage uint64) {
	w.mu.Lock()
	above, ok := w.above[cg]
	w.mu.Unlock()
	if ok && usage > above {
		select {
		case w.events <- cg:
		default:
		}
	}
}

// root is a 16 GiB machine with 8 GiB free.
var root = memcg.Stat{Limit: 16 << 30, Usage: 8 << 30, File: 4 << 30}

// runAgent runs an agent over h until cond holds or a deadline passes.
func runAgent(t *testing.T, h *fakeHost, cfg *config.Config, workers int, cond func(*Agent) bool) *Agent {
	t.Helper()
	a, stop := startAgent(t, Options{Host: h, Config: cfg, Workers: workers})
	ok := waitFor(5*time.Second, func() bool { return cond(a) })
	stop()
	if !ok && !cond(a) {
		t.Fatal("condition not reached within 5 s")
	}
	return a
}

// startAgent starts an agent with o, with short intervals unless o sets
// them, and returns it with the function that stops it and checks that
// Run returned within 5 s, without error.
func startAgent(t *testing.T, o Options) (*Agent, func()) {
	t.Helper()
	if o.ActiveInterval == 0 {
		o.ActiveInterval = 5 * time.Millisecond
	}
	if o.ScanInterval == 0 {
		o.ScanInterval = 50 * time.Millisecond
	}
	if o.Workers == 0 {
		o.Workers = 1
	}
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("Run did not return within 5 s of its context's end")
			}
		})
	}
	t.Cleanup(stop)
	return a, stop
}

// waitFor polls cond until it holds or timeout passes, and reports whether
// it held.
func waitFor(timeout time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(timeout); ; time.Sleep(2 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// managedNow reports whether a has a status for cg, and whether it has
// been observed.
func managedNow(a *Agent, cg host.Cgroup) (managed, observed bool) {
	st, err := a.Status(cg)
	return err == nil, err == nil && !st[0].Observed.IsZero()
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

// A write-out that blocks (sync_file_range waiting for the device) does
// not hold back the cgroup's next look, in an episode or not: past its
// background threshold a fast writer is on its way to the limit, and on
// the v1 host a write-out held the next look, due 1 ms later, for 33 ms
// (test/daemon TestDaemonUnpacedWriterFallback).
func TestWriteOutHoldsNoLook(t *testing.T) {
	h := newFakeHost(map[host.Cgroup]memcg.Stat{"/": root,
		"/a": {Limit: 100 * mib, Usage: 60 * mib, File: 50 * mib, Dirty: 10 * mib}})
	entered, release := h.hold(t, "/a", "write out")
	defer release()
	cfg := config.Default()
	cfg.Defaults = memcg.Knobs{DirtyBytes: 16 * mib, DirtyBackgroundBytes: 8 * mib}
	_, stop := startAgent(t, Options{Host: h, Config: cfg, ScanInterval: time.Hour})
	defer stop()
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("no write-out of /a within 5 s")
	}
	before := h.count(h.observes, "/a")
	if !waitFor(2*time.Second, func() bool { return h.count(h.observes, "/a") > before }) {
		t.Error("/a not observed again while its write-out was blocked: the write-out held its next look")
	}
}
