package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/policy"
)

// writerKernel is a fake kernel on fake time with one writer in /w: the
// writer dirties page cache at rate bytes a second while it is not frozen,
// and the device writes dirty+writeback back at bw bytes a second. It can
// freeze /w (host.Freezer) and records every freezer call, how long each
// freeze lasted, and the highest dirty+writeback any observation saw.
type writerKernel struct {
	clock *fakeClock

	mu        sync.Mutex
	rate, bw  float64 // bytes per second
	level     float64 // dirty+writeback bytes
	dirtied   float64 // bytes the writer dirtied, ever
	last      time.Time
	frozen    bool
	since     time.Time // of the freeze
	open      bool      // an episode is open
	freezeErr error     // what Freeze returns, when set

	freezes, refreezes, thaws, ends int
	longest                         time.Duration // the longest freeze
	peak                            uint64        // the highest level observed
	observes                        int
}

var (
	_ host.Host         = (*writerKernel)(nil)
	_ host.Freezer      = (*writerKernel)(nil)
	_ host.DirtyCounter = (*writerKernel)(nil)
)

func newWriterKernel(c *fakeClock, rate, bw float64) *writerKernel {
	return &writerKernel{clock: c, rate: rate, bw: bw, last: c.Now()}
}

// advance brings the model to the clock's now. Caller holds k.mu.
func (k *writerKernel) advance() {
	now := k.clock.Now()
	dt := now.Sub(k.last).Seconds()
	k.last = now
	if !k.frozen {
		k.level += k.rate * dt
		k.dirtied += k.rate * dt
	}
	k.level = max(k.level-k.bw*dt, 0)
}

func (k *writerKernel) Cgroups(context.Context) ([]host.Cgroup, error) {
	return []host.Cgroup{"/", "/w"}, nil
}

func (k *writerKernel) Observe(_ context.Context, cg host.Cgroup) (memcg.Stat, error) {
	if cg == "/" {
		return root, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.advance()
	k.observes++
	l := uint64(k.level)
	k.peak = max(k.peak, l)
	// Half dirty, half under writeback: past background either way.
	return memcg.Stat{Limit: 1 << 30, Usage: 200*mib + l, File: 200*mib + l, Dirty: l / 2, Writeback: l - l/2}, nil
}

func (k *writerKernel) Dirtied(context.Context, host.Cgroup) (uint64, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.advance()
	return uint64(k.dirtied), nil
}

func (k *writerKernel) Reclaim(context.Context, host.Cgroup, uint64) (uint64, error) {
	return 0, host.ErrNothingReclaimed
}

// WriteOut starts nothing the device is not doing already.
func (k *writerKernel) WriteOut(context.Context, host.Cgroup) (host.WriteOut, error) {
	return host.WriteOut{}, nil
}

func (k *writerKernel) Flush(context.Context, host.Cgroup) error { return nil }

func (k *writerKernel) Pause(context.Context, host.Cgroup, time.Duration) error {
	return errors.New("writerKernel: Pause called: the agent must use the held freezer")
}

func (k *writerKernel) Now() time.Time { return k.clock.Now() }

func (k *writerKernel) Freeze(_ context.Context, cg host.Cgroup) (host.Frozen, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.freezeErr != nil {
		return nil, k.freezeErr
	}
	if k.open {
		return nil, fmt.Errorf("freeze %s: an episode is open already", cg)
	}
	k.advance()
	k.freezes++
	k.open, k.frozen, k.since = true, true, k.clock.Now()
	return writerEpisode{k}, nil
}

// setFrozen changes the freezer state at the clock's now. Caller holds k.mu.
func (k *writerKernel) setFrozen(f bool) {
	k.advance()
	if k.frozen && !f {
		k.longest = max(k.longest, k.clock.Now().Sub(k.since))
	}
	if !k.frozen && f {
		k.since = k.clock.Now()
	}
	k.frozen = f
}

// writerEpisode is the host.Frozen of writerKernel.
type writerEpisode struct{ k *writerKernel }

func (e writerEpisode) Thaw() error {
	e.k.mu.Lock()
	defer e.k.mu.Unlock()
	if !e.k.open {
		return errors.New("thaw after end")
	}
	e.k.thaws++
	e.k.setFrozen(false)
	return nil
}

func (e writerEpisode) Refreeze() error {
	e.k.mu.Lock()
	defer e.k.mu.Unlock()
	if !e.k.open {
		return errors.New("refreeze after end")
	}
	e.k.refreezes++
	e.k.setFrozen(true)
	return nil
}

func (e writerEpisode) End() error {
	e.k.mu.Lock()
	defer e.k.mu.Unlock()
	if !e.k.open {
		return nil
	}
	e.k.ends++
	e.k.setFrozen(false)
	e.k.open = false
	return nil
}

// set changes the writer's rate at the clock's now.
func (k *writerKernel) setRate(r float64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.advance()
	k.rate = r
}

func (k *writerKernel) snapshot() writerKernel {
	k.mu.Lock()
	defer k.mu.Unlock()
	return writerKernel{freezes: k.freezes, refreezes: k.refreezes, thaws: k.thaws, ends: k.ends,
		longest: k.longest, peak: k.peak, frozen: k.frozen, open: k.open, observes: k.observes}
}

// throttleConfig is 16 MiB dirty_bytes, 8 MiB background: freerun 12 MiB.
func throttleConfig() *config.Config {
	cfg := config.Default()
	cfg.Defaults = memcg.Knobs{DirtyBytes: 16 * mib, DirtyBackgroundBytes: 8 * mib, WritebackFirst: true}
	return cfg
}

// stepper drives an agent's steps of /w as its loop would, on fake time
// and deterministically: it steps the cgroup when the decision's NextLook
// passes, or at once when a throttle deadline asks for a step (a.due),
// and fires the throttle's timers in between.
type stepper struct {
	t     *testing.T
	a     *Agent
	st    *cgroupState
	clock *fakeClock
	steps int
}

func newStepper(t *testing.T, k host.Host, c *fakeClock, self []host.Cgroup) *stepper {
	t.Helper()
	a, err := New(Options{Host: k, Config: throttleConfig(), Clock: c, Self: self})
	if err != nil {
		t.Fatal(err)
	}
	var sts []*cgroupState
	a.scan(context.Background(), func(st *cgroupState) { sts = append(sts, st) }, true)
	for _, st := range sts {
		if st.cg == "/w" {
			return &stepper{t: t, a: a, st: st, clock: c}
		}
	}
	t.Fatal("no /w after a scan")
	return nil
}

// step steps /w once and returns when the decision says to step again
// (the zero time: only when woken).
func (s *stepper) step() (stepResult, time.Time) {
	s.steps++
	r := s.a.step(context.Background(), s.st)
	if r.next == 0 {
		return r, time.Time{}
	}
	return r, r.at.Add(r.next)
}

// run steps /w until the clock reaches end, as the loop would, with the
// kernel k as the watcher: at 1 ms resolution, it reports /w once its
// usage rises above the decision's Wake.UsageAbove.
func (s *stepper) run(k *writerKernel, end time.Time) {
	for s.clock.Now().Before(end) {
		r, next := s.step()
		if next.IsZero() || next.After(end) {
			next = end
		}
		due := func() bool { return len(s.a.due) > 0 }
		for s.clock.Now().Before(next) && !due() && k.usage() <= r.wake.UsageAbove {
			s.clock.AdvanceTo(minTime(next, s.clock.Now().Add(time.Millisecond)), due)
		}
		for len(s.a.due) > 0 {
			<-s.a.due
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// usage is /w's usage now.
func (k *writerKernel) usage() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.advance()
	return 200*mib + uint64(k.level)
}

// seed 004 on the closed loop: a writer four times faster than its device
// is frozen at the dirty limit, thawed when the device has drained it, and
// frozen again after RunFor, all in one throttle episode (one Freeze, one
// End), never frozen longer than MaxPause, and dirty+writeback stays near
// the limit. When the writer stops, the episode ends with the cgroup
// thawed.
func TestClosedLoopOnFakeTime(t *testing.T) {
	tests := []struct {
		name     string
		rate, bw float64 // bytes per second
		// peakAtMost bounds dirty+writeback as observed, in dirty_bytes.
		peakAtMost float64
	}{
		{"writer 4x the device", 400e6, 100e6, 1.25},
		{"writer 15x the device", 1.5e9, 100e6, 1.25},
		{"writer barely faster", 120e6, 100e6, 1.25},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeClock()
			k := newWriterKernel(c, tt.rate, tt.bw)
			s := newStepper(t, k, c, nil)
			start := c.Now()
			s.run(k, start.Add(2*time.Second))
			mid := k.snapshot()
			if mid.freezes != 1 {
				t.Errorf("%d episodes (Freeze calls) in 2 s of writing, want 1", mid.freezes)
			}
			if mid.refreezes == 0 || mid.thaws == 0 {
				t.Errorf("thaws %d, refreezes %d: want the sawtooth of thaw on drain and refreeze", mid.thaws, mid.refreezes)
			}
			if mid.ends != 0 {
				t.Errorf("the episode ended %d times while the writer wrote", mid.ends)
			}
			if mid.longest > policy.MaxPause {
				t.Errorf("a freeze lasted %v, more than MaxPause %v", mid.longest, policy.MaxPause)
			}
			if limit := 16 * mib; float64(mid.peak) > tt.peakAtMost*float64(limit) {
				t.Errorf("dirty+writeback peaked at %.1f MiB, over %.2f x dirty_bytes", float64(mid.peak)/mib, tt.peakAtMost)
			}
			st, _ := s.a.Status("/w")
			if cn := st[0].Counters; cn.Pauses == 0 || cn.Paused <= 0 || cn.Paused > 2*time.Second {
				t.Errorf("Counters: %d pauses for %v, want some within the 2 s run", cn.Pauses, cn.Paused)
			}

			k.setRate(0)
			s.run(k, c.Now().Add(3*time.Second))
			end := k.snapshot()
			if end.ends != 1 || end.frozen || end.open {
				t.Errorf("after the writer stopped: %d ends, frozen %v, open %v; want the episode ended, thawed", end.ends, end.frozen, end.open)
			}
			if end.freezes != 1 {
				t.Errorf("%d episodes, want 1", end.freezes)
			}
			t.Logf("%d steps: thaws %d, refreezes %d, longest freeze %v, peak %.1f MiB",
				s.steps, end.thaws, end.refreezes, end.longest, float64(end.peak)/mib)
		})
	}
}

// A freeze ends on time by the cgroup's own timer (HoldFor) with no step
// at all, and the timer freezes it again RunFor later: a slow or busy loop
// never extends a freeze nor lets the writer run unseen.
func TestHoldForThawsOnItsOwn(t *testing.T) {
	c := newFakeClock()
	k := newWriterKernel(c, 400e6, 100e6)
	s := newStepper(t, k, c, nil)
	// Step until the freeze.
	for k.snapshot().freezes == 0 && s.steps < 10000 {
		_, next := s.step()
		if next.IsZero() {
			next = c.Now().Add(time.Millisecond)
		}
		c.AdvanceTo(next, func() bool { return len(s.a.due) > 0 })
		for len(s.a.due) > 0 {
			<-s.a.due
		}
	}
	// Step once more: frozen, the decision holds it.
	r, _ := s.step()
	if !k.snapshot().frozen {
		t.Fatalf("not frozen after the freeze's next step (throttled=%v)", r.throttled)
	}
	frozenAt := k.snapshot().since
	_ = frozenAt
	// No more steps: only the timers act.
	c.Advance(policy.MaxPause + time.Millisecond)
	got := k.snapshot()
	if got.thaws == 0 {
		t.Fatalf("still frozen %v after the freeze with no step: HoldFor did not thaw it", policy.MaxPause)
	}
	if got.longest > policy.MaxPause {
		t.Errorf("frozen %v without a step, more than MaxPause", got.longest)
	}
	if len(s.a.due) == 0 {
		t.Errorf("the timer's thaw asked for no step")
	}
	// RunFor: refrozen by the timer while nothing steps.
	c.Advance(time.Second)
	got = k.snapshot()
	if got.refreezes == 0 {
		t.Errorf("not refrozen within 1 s of the thaw with no step: RunFor did not act")
	}
	if got.longest > policy.MaxPause {
		t.Errorf("a driver refreeze lasted %v, more than MaxPause", got.longest)
	}
}

// A cgroup no freezer reaches (the host says errors.ErrUnsupported) is
// reported "throttle unavailable" with the host's reason and never frozen
// again; one that holds memcgd is never frozen at all.
func TestFreezerNoneReported(t *testing.T) {
	unsupported := fmt.Errorf("freeze /w: no freezer cgroup and cannot create one: %w", errors.ErrUnsupported)
	tests := []struct {
		name       string
		freezeErr  error
		self       []host.Cgroup
		wantStatus string
		wantCalls  int // Freeze calls that reached the host
	}{
		{"no freezer", unsupported, nil, "throttle unavailable: " + unsupported.Error(), 0},
		{"holds memcgd", nil, []host.Cgroup{"/w/daemon"}, HoldsMemcgd, 0},
		{"freezer works", nil, nil, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeClock()
			k := newWriterKernel(c, 400e6, 100e6)
			k.freezeErr = tt.freezeErr
			s := newStepper(t, k, c, tt.self)
			s.run(k, c.Now().Add(500*time.Millisecond))
			st, err := s.a.Status("/w")
			if err != nil {
				t.Fatal(err)
			}
			if st[0].Throttle != tt.wantStatus {
				t.Errorf("Status.Throttle = %q, want %q", st[0].Throttle, tt.wantStatus)
			}
			if got := k.snapshot(); got.freezes != tt.wantCalls || tt.wantCalls == 0 && got.frozen {
				t.Errorf("%d freezes (frozen now %v), want %d", got.freezes, got.frozen, tt.wantCalls)
			}
		})
	}
}

// The loop steps a cgroup when its decision's NextLook passes on the
// agent's clock, not before, whatever the wall clock does; and at
// shutdown an open episode is ended (thawed) before Run returns.
func TestLoopOnFakeTime(t *testing.T) {
	c := newFakeClock()
	k := newWriterKernel(c, 400e6, 100e6)
	k.level = 10 * mib // past background: active from the first step
	a, stop := startAgent(t, Options{Host: k, Config: throttleConfig(), Clock: c,
		ScanInterval: time.Hour, AuditInterval: time.Hour})
	if !waitFor(5*time.Second, func() bool { return k.snapshot().observes >= 1 }) {
		t.Fatal("the first scan did not step /w")
	}
	// /w dirties: the policy wants another look within ActiveInterval.
	// The fake clock stands still: no step however long the wall waits.
	time.Sleep(50 * time.Millisecond)
	if n := k.snapshot().observes; n != 1 {
		t.Fatalf("%d observations with the agent's clock stopped, want 1", n)
	}
	// Advance to each deadline: the loop steps /w as each NextLook
	// passes, and not before, until it freezes it.
	for i := 0; i < 1000 && k.snapshot().freezes == 0; i++ {
		before := k.snapshot().observes
		next, ok := c.nextDeadline()
		if !ok {
			t.Fatal("the loop armed no timer for an active cgroup")
		}
		c.AdvanceTo(next.Add(-time.Microsecond), nil)
		time.Sleep(time.Millisecond)
		if n := k.snapshot().observes; n != before {
			t.Fatalf("stepped %v before its NextLook", time.Microsecond)
		}
		c.AdvanceTo(next, nil)
		if !waitFor(5*time.Second, func() bool {
			_, armed := c.nextDeadline()
			return k.snapshot().observes > before && armed
		}) {
			t.Fatalf("no step at the NextLook deadline %v", next)
		}
	}
	if got := k.snapshot(); got.freezes != 1 || !got.open {
		t.Fatalf("after stepping to the limit: %d freezes, open %v; want one open episode", got.freezes, got.open)
	}
	stop()
	if got := k.snapshot(); got.ends != 1 || got.frozen {
		t.Errorf("after Run returned: %d ends, frozen %v; want the open episode ended and the cgroup thawed", got.ends, got.frozen)
	}
	_ = a
}

// A freeze the host refuses (the cgroup frozen by someone else) is an
// error once, not once a step: the closed loop asks again every
// millisecond or so while the cgroup stays at its limit.
func TestRefusedFreezeSaidOnce(t *testing.T) {
	c := newFakeClock()
	k := newWriterKernel(c, 400e6, 100e6)
	k.freezeErr = errors.New("freeze /w: cgroup.freeze holds \"1\": frozen by someone else")
	s := newStepper(t, k, c, nil)
	s.run(k, c.Now().Add(500*time.Millisecond))
	st, err := s.a.Status("/w")
	if err != nil {
		t.Fatal(err)
	}
	if e := st[0].Counters.Errors; e != 1 {
		t.Errorf("Errors = %d after %d steps refused the same way, want 1", e, s.steps)
	}
	if st[0].Throttle != "" {
		t.Errorf("Status.Throttle = %q: a refusal is not an unavailable freezer", st[0].Throttle)
	}
}

// trackedKernel is a writerKernel whose host says the eBPF tracker is in
// force (host.FastPath), or not.
type trackedKernel struct {
	*writerKernel
	tracker bool
}

var _ host.FastPath = trackedKernel{}

func (k trackedKernel) DirtyPath() host.DirtyPath {
	if k.tracker {
		return host.DirtyPath{Tracker: true}
	}
	return host.DirtyPath{Reason: "disabled"}
}

func (k trackedKernel) ThrottleUnavailable(host.Cgroup) string { return "" }

// With the tracker, a watcher's report of an active cgroup waiting for its
// NextLook steps it at once: the report is the DirtiedAbove the last
// decision armed, and the policy leaves a dirtying cgroup to it, so a
// report held until NextLook lets a thawed writer run unseen (on the v1
// host, 36 ms and 70 MiB past the report: TestDaemonUnpacedWriterTracker).
// Without the tracker a report of an active cgroup is a hint, left to its
// NextLook, which the policy derives from its dirtying rate.
func TestTrackerReportStepsActiveCgroup(t *testing.T) {
	for _, tc := range []struct {
		tracker bool
		stepped bool
	}{
		{tracker: true, stepped: true},
		{tracker: false, stepped: false},
	} {
		t.Run(fmt.Sprintf("tracker=%v", tc.tracker), func(t *testing.T) {
			c := newFakeClock()
			k := newWriterKernel(c, 400e6, 100e6)
			k.level = 10 * mib // past background: active from the first step
			w := newFakeWatcher()
			_, stop := startAgent(t, Options{Host: trackedKernel{k, tc.tracker}, Watcher: w, Config: throttleConfig(),
				Clock: c, ScanInterval: time.Hour, AuditInterval: time.Hour})
			defer stop()
			if !waitFor(5*time.Second, func() bool {
				_, armed := c.nextDeadline()
				return k.snapshot().observes >= 1 && armed
			}) {
				t.Fatal("the first scan did not step /w and schedule its next look")
			}
			// The clock stands still: only the report can step /w now.
			before := k.snapshot().observes
			w.events <- "/w"
			got := waitFor(200*time.Millisecond, func() bool { return k.snapshot().observes > before })
			if got != tc.stepped {
				t.Errorf("stepped on the watcher's report: %v, want %v", got, tc.stepped)
			}
		})
	}
}
