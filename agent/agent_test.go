package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/internal/cputime"
	"github.com/memcgd/memcgd/memcg"
)

// The executor's tests run in synctest bubbles: time is fake, and
// synctest.Wait returns once every goroutine of the daemon is blocked,
// so a test asserts what the daemon did by then, with no sleeps. What the
// scheduler decides is package sched's to test; these check that the
// executor carries it out on a host, concurrently, and stops cleanly.

const mib = 1 << 20

var root = memcg.Stat{Limit: memcg.NoLimit}

// fakeHost is an in-memory kernel: write-out cleans the dirty pages,
// reclaim lowers usage, the freezer freezes. A call to a cgroup in block
// waits until the test closes the channel.
type fakeHost struct {
	mu       sync.Mutex
	stats    map[host.Cgroup]memcg.Stat
	calls    map[string]int // "kind cgroup"
	frozen   map[host.Cgroup]bool
	block    map[string]chan struct{} // "kind cgroup" → released when closed
	spin     map[string]time.Duration // "kind cgroup" → CPU time the call burns
	freezeOK bool
}

func newFakeHost(cgs map[host.Cgroup]memcg.Stat) *fakeHost {
	return &fakeHost{stats: cgs, calls: map[string]int{}, frozen: map[host.Cgroup]bool{}, block: map[string]chan struct{}{},
		spin: map[string]time.Duration{}, freezeOK: true}
}

// enter counts a call and waits while it is blocked.
func (f *fakeHost) enter(kind string, cg host.Cgroup) {
	f.mu.Lock()
	key := kind + " " + string(cg)
	f.calls[key]++
	ch, spin := f.block[key], f.spin[key]
	f.mu.Unlock()
	if ch != nil {
		<-ch
	}
	for start := cputime.Thread(); cputime.Thread()-start < spin; {
	}
}

func (f *fakeHost) count(kind string, cg host.Cgroup) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[kind+" "+string(cg)]
}

func (f *fakeHost) isFrozen(cg host.Cgroup) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.frozen[cg]
}

func (f *fakeHost) Cgroups(context.Context) ([]host.Cgroup, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []host.Cgroup
	for _, cg := range []host.Cgroup{"/", "/a", "/b", "/u"} {
		if _, ok := f.stats[cg]; ok {
			out = append(out, cg)
		}
	}
	return out, nil
}

func (f *fakeHost) Observe(_ context.Context, cg host.Cgroup) (memcg.Stat, error) {
	f.enter("observe", cg)
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.stats[cg]
	if !ok {
		return s, host.ErrVanished
	}
	return s, nil
}

func (f *fakeHost) Reclaim(_ context.Context, cg host.Cgroup, n, _ uint64) (uint64, error) {
	f.enter("reclaim", cg)
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.stats[cg]
	n = min(n, s.File-s.Dirty)
	s.Usage, s.File = s.Usage-n, s.File-n
	f.stats[cg] = s
	return n, nil
}

func (f *fakeHost) WriteOut(_ context.Context, cg host.Cgroup, _ uint64) (host.WriteOut, error) {
	f.enter("write out", cg)
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.stats[cg]
	w := host.WriteOut{Files: 1, Bytes: s.Dirty}
	s.Dirty = 0
	f.stats[cg] = s
	return w, nil
}

func (f *fakeHost) Flush(_ context.Context, cg host.Cgroup) error {
	f.enter("flush", cg)
	return nil
}

func (f *fakeHost) Now() time.Time { return time.Now() }

func (f *fakeHost) Freeze(_ context.Context, cg host.Cgroup) (host.Frozen, error) {
	f.enter("freeze", cg)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.freezeOK {
		return nil, errors.New("no")
	}
	f.frozen[cg] = true
	return &fakeEpisode{f, cg}, nil
}

type fakeEpisode struct {
	f  *fakeHost
	cg host.Cgroup
}

func (e *fakeEpisode) set(v bool) error {
	e.f.mu.Lock()
	defer e.f.mu.Unlock()
	e.f.frozen[e.cg] = v
	return nil
}
func (e *fakeEpisode) Thaw() error     { return e.set(false) }
func (e *fakeEpisode) Refreeze() error { return e.set(true) }
func (e *fakeEpisode) End() error      { return e.set(false) }

// run starts an agent on h in the bubble and returns it and the function
// that stops it and returns Run's error.
func run(t *testing.T, o Options) (*Agent, func() error) {
	t.Helper()
	if o.Config == nil {
		o.Config = config.Default()
	}
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	return a, func() error { cancel(); return <-done }
}

func TestTheDaemonIsReadyOnceItsFirstScanIsDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newFakeHost(map[host.Cgroup]memcg.Stat{"/": root, "/a": {Limit: 100 * mib}})
		block := make(chan struct{})
		h.block["observe /a"] = block
		a, stop := run(t, Options{Host: h})
		synctest.Wait()
		if err := a.Ready(); err == nil {
			t.Error("ready while /a's first step is in flight")
		}
		close(block)
		synctest.Wait()
		if err := a.Ready(); err != nil {
			t.Errorf("not ready once every cgroup was stepped: %v", err)
		}
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
}

func TestTheExecutorCarriesOutTheDecisions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newFakeHost(map[host.Cgroup]memcg.Stat{"/": root,
			"/a": {Limit: 100 * mib, Usage: 60 * mib, File: 50 * mib, Dirty: 20 * mib},
			"/u": {Limit: memcg.NoLimit, Usage: 60 * mib, File: 50 * mib, Dirty: 20 * mib}})
		a, stop := run(t, Options{Host: h})
		synctest.Wait()
		if h.count("write out", "/a") != 1 || h.count("write out", "/u") != 0 {
			t.Errorf("write-outs /a %d /u %d, want /a's own (past its background threshold) and not the unmanaged /u's",
				h.count("write out", "/a"), h.count("write out", "/u"))
		}
		st, err := a.Status("/a")
		if err != nil || st[0].Counters.WriteOuts != 1 || st[0].Counters.WriteOutBytes != 20*mib || !st[0].Managed {
			t.Errorf("Status(/a) = %+v, %v", st, err)
		}
		if st, err := a.Status("/u"); err != nil || st[0].Managed || st[0].Unmanaged == "" {
			t.Errorf("Status(/u) = %+v, %v: want unmanaged, with the reason", st, err)
		}
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
}

func TestStoppingThawsEveryFrozenCgroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := config.Default()
		cfg.Defaults = memcg.Knobs{DirtyBytes: 16 * mib, DirtyBackgroundBytes: 8 * mib}
		h := newFakeHost(map[host.Cgroup]memcg.Stat{"/": root, "/a": {Limit: 1 << 30, Usage: 100 * mib, File: 100 * mib, Writeback: 17 * mib}})
		_, stop := run(t, Options{Host: h, Config: cfg})
		synctest.Wait()
		if !h.isFrozen("/a") {
			t.Fatal("/a past its dirty limit, all under writeback, is not frozen")
		}
		if err := stop(); err != nil {
			t.Error(err)
		}
		if h.isFrozen("/a") {
			t.Error("Run returned with /a frozen")
		}
	})
}

func TestRunReturnsWithinStopTimeoutWhileAHostCallIsStuck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newFakeHost(map[host.Cgroup]memcg.Stat{"/": root, "/a": {Limit: 100 * mib, Usage: 60 * mib, File: 50 * mib, Dirty: 20 * mib}})
		stuck := make(chan struct{})
		h.block["write out /a"] = stuck
		_, stop := run(t, Options{Host: h, StopTimeout: time.Second})
		synctest.Wait()
		start := time.Now()
		if err := stop(); err != nil {
			t.Error(err)
		}
		if took := time.Since(start); took != time.Second {
			t.Errorf("Run returned %v after its context ended, with a write-out stuck: want the 1 s StopTimeout", took)
		}
		close(stuck) // the worker left behind exits
	})
}

func TestSetRefusesACgroupTheDaemonDoesNotManage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newFakeHost(map[host.Cgroup]memcg.Stat{"/": root, "/a": {Limit: 100 * mib}, "/u": {Limit: memcg.NoLimit}})
		a, stop := run(t, Options{Host: h})
		synctest.Wait()
		for _, tt := range []struct {
			cg   host.Cgroup
			want string
		}{
			{"/u", "manage.limited_only"},
			{"/nope", "does not exist"},
		} {
			err := a.Set(tt.cg, map[string]string{"dirty_bytes": "16M"})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Set(%s) = %v, want an error that says %q", tt.cg, err, tt.want)
			}
		}
		if err := a.Set("/a", map[string]string{"dirty_bytes": "16M"}); err == nil || !strings.Contains(err.Error(), "no overrides") {
			t.Errorf("Set(/a) on a daemon without overrides = %v", err)
		}
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
}

func TestAReloadStepsEveryCgroupAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newFakeHost(map[host.Cgroup]memcg.Stat{"/": root, "/a": {Limit: 100 * mib}, "/b": {Limit: 100 * mib}})
		a, stop := run(t, Options{Host: h})
		synctest.Wait()
		before := h.count("observe", "/b")
		a.Reload(config.Default())
		synctest.Wait()
		if h.count("observe", "/b") != before+1 {
			t.Errorf("a reload stepped the idle /b %d times, want once", h.count("observe", "/b")-before)
		}
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
}

// Each op's CPU time is counted by its kind, on the thread that carried
// it out.
func TestTheWorkersCountTheirCallsCPUTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newFakeHost(map[host.Cgroup]memcg.Stat{"/": root,
			"/a": {Limit: 100 * mib, Usage: 60 * mib, File: 50 * mib, Dirty: 20 * mib}})
		h.spin["write out /a"] = 20 * time.Millisecond
		a, stop := run(t, Options{Host: h})
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		calls := a.CallCPU()
		if got := calls["write out"]; got < 20*time.Millisecond || got > time.Second {
			t.Errorf("write out: %v of CPU counted, want the 20ms it burnt (and not far more)", got)
		}
		if got := calls["observe"]; got <= 0 || got >= calls["write out"] {
			t.Errorf("observe: %v of CPU counted, want some, less than the write-out's", got)
		}
	})
}

// fakeWatcher records the watches armed.
type fakeWatcher struct {
	mu      sync.Mutex
	watches map[host.Cgroup]host.Wake
	events  chan host.Cgroup
}

func (w *fakeWatcher) Watch(cg host.Cgroup, wake host.Wake) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.watches[cg] = wake
	return nil
}

func (w *fakeWatcher) Unwatch(cg host.Cgroup) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.watches, cg)
}

func (w *fakeWatcher) Events() <-chan host.Cgroup { return w.events }
func (w *fakeWatcher) Close() error               { return nil }

// A step's watch is armed on the loop itself, not handed to a worker, and
// every call, inline or not, is counted by its kind.
func TestWatchesAreArmedAndEveryCallCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newFakeHost(map[host.Cgroup]memcg.Stat{"/": root,
			"/a": {Limit: 100 * mib, Usage: 10 * mib, File: 5 * mib, Dirty: 1 * mib}})
		w := &fakeWatcher{watches: map[host.Cgroup]host.Wake{}, events: make(chan host.Cgroup)}
		a, stop := run(t, Options{Host: h, Watcher: w})
		synctest.Wait()
		w.mu.Lock()
		_, armed := w.watches["/a"]
		w.mu.Unlock()
		if !armed {
			t.Error("no watch of /a after its step")
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		calls := a.Calls()
		if calls["watch"] == 0 || calls["observe"] == 0 || calls["write out"] != uint64(h.count("write out", "/a")) {
			t.Errorf("calls %v, want watches and observes counted, and write out %d, as the host saw", calls, h.count("write out", "/a"))
		}
	})
}
