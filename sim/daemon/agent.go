package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memcgd/memcgd/agent"
	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/sim/kernel"
)

// Agent runs the real agent (agent.New, Run) against the simulated
// kernel: its host calls, its watcher and its clock are the simulation's.
//
// The agent runs its own goroutines (the loop, one worker, hand-offs,
// timer callbacks). The simulation moves only when all of them are parked
// (quiesce.go), and runs every call they make to the kernel itself, one at
// a time, in a fixed order: a call blocks its goroutine until the driver,
// finding every agent goroutine parked, picks the pending call with the
// least key (method, cgroup), runs it and lets the caller go. So the
// kernel is only ever touched by the simulation's goroutine, and the
// order of the calls does not depend on the Go scheduler.
//
// Determinism is not guaranteed (docs/sim.md): repeated runs in a normal
// build have matched, but under the race detector's scheduling two runs
// can part, an entry of the agent's timer heap valid in one run and stale
// in the other at the same simulated instant, with the same calls and
// results before it. The cause is not found.
//
// What is modelled: the agent's timers (its loop's NextLook heap, the
// throttle's HoldFor and RunFor) fire on the simulated clock; the watcher
// arms the kernel's usage and dirtied thresholds (the dirtied one only
// with Tracker, as the eBPF tracker does) and delivers a report Latency
// after the crossing; the agent's reaction delay it anticipates
// (Options.Reaction) is Latency too. What is not: the time the agent's
// own code and host calls take (zero on the simulated clock), and its
// slow scan and audit (wall-clock tickers, set beyond any run).
type Agent struct {
	H      *Host
	Config *config.Config
	// ActiveInterval is the agent's --active-interval; Latency the event
	// latency from a threshold crossing to the report reaching the loop.
	ActiveInterval, Latency time.Duration
	// Tracker says a dirtied-bytes tracker is in force (host.FastPath).
	Tracker bool
	// Log receives the agent's logs; nil discards them.
	Log *slog.Logger

	// Steps counts observations of non-root cgroups (each step reads its
	// cgroup once), Calls every host call, Wakeups the watcher's reports
	// delivered, Drains the times the driver waited for the agent;
	// DriverFreezes and DriverThaws the freezer calls of the throttle's
	// own timers (RunFor, HoldFor passing with no newer decision).
	Steps, Calls, Wakeups, Drains, DriverFreezes, DriverThaws int64

	k      *kernel.Kernel
	a      *agent.Agent
	cancel context.CancelFunc
	runErr chan error
	// spawn runs functions on goroutines started by the spawner, whose
	// descendants are the agent's goroutines.
	spawn   chan func()
	spawner int64
	now     atomic.Int64  // the simulated clock, for the agent's goroutines
	funcs   atomic.Uint64 // AfterFunc timers made
	buf     []byte
	stopped bool
	byTimer bool      // the drain began with a throttle deadline's callback
	callLog *[]string // tests: every call served
	// awake is set while the agent may run: from the moment the driver
	// wakes it (Start, a timer, a report, Stop) until a drain has found
	// every goroutine of it parked and armed its timers. A host call or
	// a timer change with awake unset comes from a goroutine the
	// quiescence check took for parked while it was not: it ran while the
	// simulated clock moved, and its timers may never be armed. stray
	// keeps the first, for Stop to report.
	awake atomic.Bool
	stray atomic.Pointer[string]

	mu      sync.Mutex // guards pending and the clock's timers
	pending []*hostCall
	timers  []*simTimer // changed since the last sync, in change order
	events  chan host.Cgroup

	report   map[int32]int32 // memcg id → kernel timer of its pending report
	byKernel map[int32]*simTimer
	free     []int32 // kernel timers no simTimer holds
}

// hostCall is a call of the agent's waiting for the driver to run it.
type hostCall struct {
	method string
	cg     host.Cgroup
	fn     func()
	done   chan struct{}
}

// Start builds the agent on k and runs it until its start-up scan has
// stepped every cgroup. It must be called on the goroutine that then
// runs k (the kernel's events drive the agent).
func (d *Agent) Start(k *kernel.Kernel) error {
	d.k = k
	d.buf = make([]byte, 64<<10)
	d.report = map[int32]int32{}
	d.byKernel = map[int32]*simTimer{}
	d.events = make(chan host.Cgroup, 64)
	d.now.Store(int64(k.Now()))
	k.SetWatchHook(d.watchFired)
	a, err := agent.New(agent.Options{
		Host: agentHost{d}, Watcher: simWatcher{d}, Config: d.Config, Clock: simClock{d},
		Workers: 1, ActiveInterval: d.ActiveInterval, Reaction: d.Latency,
		ScanInterval: 1 << 62, AuditInterval: 1 << 62, Log: d.Log,
	})
	if err != nil {
		return fmt.Errorf("sim agent: %w", err)
	}
	d.a = a
	d.spawn = make(chan func())
	ids := make(chan int64)
	go func() {
		ids <- goroutineID()
		for f := range d.spawn {
			go f()
		}
	}()
	d.spawner = <-ids
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.runErr = make(chan error, 1)
	d.awake.Store(true)
	d.spawn <- func() { d.runErr <- a.Run(ctx) }
	d.drain()
	return nil
}

// Stop stops the agent and serves its calls until Run returns: Run ends
// every throttle episode (thaws) on the way out. It reports Run's error,
// and an agent goroutine that ran while the simulated clock moved (the
// run's results do not hold then).
func (d *Agent) Stop() error {
	d.stopped = true
	d.awake.Store(true)
	d.cancel()
	var err error
	for done := false; !done; {
		select {
		case err = <-d.runErr:
			done = true
		default:
			if !d.serveOne() {
				runtime.Gosched()
			}
		}
	}
	for d.serveOne() {
	}
	close(d.spawn)
	if s := d.stray.Load(); s != nil {
		err = errors.Join(err, fmt.Errorf("sim agent: %s while the simulated clock moved: the quiescence check took a busy goroutine for parked", *s))
	}
	return err
}

// Errors sums the failed actions the agent counted, over every cgroup.
func (d *Agent) Errors() int64 {
	st, _ := d.a.Status("")
	var n int64
	for _, s := range st {
		n += int64(s.Counters.Errors)
	}
	return n
}

// drain runs the agent until every goroutine of it is parked with no call
// pending, then arms the kernel timers its clock asks for.
func (d *Agent) drain() {
	if d.stopped {
		return // the kernel runs on after Stop: its timers deliver nothing
	}
	d.Drains++
	if d.callLog != nil {
		*d.callLog = append(*d.callLog, fmt.Sprintf("%d drain", d.k.Now()))
	}
	d.now.Store(int64(d.k.Now()))
	for {
		d.waitParked()
		if !d.serveOne() {
			break
		}
	}
	d.byTimer = false
	d.syncTimers()
	d.awake.Store(false)
}

// touch records, for Stop, an agent goroutine acting on the simulation
// (what) while the agent should be parked. Agent goroutines only.
func (d *Agent) touch(what string) {
	if d.awake.Load() {
		return
	}
	s := fmt.Sprintf("an agent goroutine's %s at %v", what, time.Duration(d.now.Load()))
	d.stray.CompareAndSwap(nil, &s)
}

// waitParked waits until every agent goroutine is parked.
func (d *Agent) waitParked() {
	start := time.Now()
	for i := 0; ; i++ {
		runtime.Gosched()
		if allParked(snapshot(&d.buf), d.spawner) {
			return
		}
		if i%1024 == 1023 && time.Since(start) > time.Minute {
			panic(fmt.Sprintf("sim agent: the agent's goroutines have not parked in %v:\n%s", time.Since(start), d.buf))
		}
	}
}

// serveOne runs the pending call with the least key, if any.
func (d *Agent) serveOne() bool {
	d.mu.Lock()
	if len(d.pending) == 0 {
		d.mu.Unlock()
		return false
	}
	i := 0
	for j, c := range d.pending[1:] {
		if cmp.Or(cmp.Compare(c.method, d.pending[i].method), cmp.Compare(c.cg, d.pending[i].cg)) < 0 {
			i = j + 1
		}
	}
	c := d.pending[i]
	if d.callLog != nil && len(d.pending) > 1 {
		*d.callLog = append(*d.callLog, fmt.Sprintf("%d pending %d", d.k.Now(), len(d.pending)))
	}
	d.pending = slices.Delete(d.pending, i, i+1)
	d.mu.Unlock()
	d.Calls++
	if d.callLog != nil {
		*d.callLog = append(*d.callLog, fmt.Sprintf("%d %s %s", d.k.Now(), c.method, c.cg))
	}
	c.fn()
	close(c.done)
	return true
}

// call runs fn on the driver's goroutine, in its turn, and returns once
// it has run. Agent goroutines only.
func (d *Agent) call(method string, cg host.Cgroup, fn func()) {
	d.touch("call " + method)
	c := &hostCall{method: method, cg: cg, fn: fn, done: make(chan struct{})}
	d.mu.Lock()
	d.pending = append(d.pending, c)
	d.mu.Unlock()
	<-c.done
}

// watchFired is the kernel's threshold hook: the report reaches the agent
// Latency later.
func (d *Agent) watchFired(k *kernel.Kernel, m int32) {
	id, ok := d.report[m]
	if !ok {
		id = k.NewTimer(func(k *kernel.Kernel) {
			// The clock moves before the report wakes the loop.
			d.now.Store(int64(k.Now()))
			d.awake.Store(true)
			d.Wakeups++
			if d.callLog != nil {
				*d.callLog = append(*d.callLog, fmt.Sprintf("%d report", d.k.Now()))
			}
			select {
			case d.events <- host.Cgroup(k.MemcgName(m)):
			default: // a full channel drops the report, as a Watcher does
			}
			d.drain()
		})
		d.report[m] = id
	}
	at := k.Now() + kernel.Time(d.Latency)
	if t, armed := k.TimerArmed(id); armed && t <= at {
		return
	}
	k.ArmTimer(id, at)
}

// simTimer is a timer of the agent's clock, fired by a kernel timer.
type simTimer struct {
	d     *Agent
	ch    chan time.Time // NewTimer's
	f     func()         // AfterFunc's
	at    kernel.Time    // mu
	armed bool           // mu
	kt    int32          // the kernel timer; -1: none. Driver only.
	seq   uint64         // creation order, per kind: NewTimer's first
	dirty bool           // mu: changed since the last sync
}

// syncTimers carries the clock's timer changes to the kernel's timers.
// Driver only, with the agent parked.
func (d *Agent) syncTimers() {
	d.mu.Lock()
	ts := d.timers
	d.timers = nil
	type arm struct {
		t     *simTimer
		at    kernel.Time
		armed bool
	}
	arms := make([]arm, 0, len(ts))
	for _, t := range ts {
		arms = append(arms, arm{t, t.at, t.armed})
		t.dirty = false
	}
	d.mu.Unlock()
	// The changes came from goroutines that may have run side by side
	// (the loop's Reset, a worker's AfterFunc): arm in an order of their
	// own, so that timers due at the same instant fire in the same order.
	slices.SortStableFunc(arms, func(x, y arm) int {
		return cmp.Or(cmp.Compare(x.at, y.at), cmp.Compare(x.t.seq, y.t.seq))
	})
	for _, a := range arms {
		t := a.t
		if !a.armed {
			if t.kt >= 0 {
				d.k.StopTimer(t.kt)
				delete(d.byKernel, t.kt)
				d.free = append(d.free, t.kt)
				t.kt = -1
			}
			continue
		}
		if t.kt < 0 {
			if n := len(d.free); n > 0 {
				t.kt, d.free = d.free[n-1], d.free[:n-1]
			} else {
				var kt int32
				kt = d.k.NewTimer(func(*kernel.Kernel) { d.timerFired(kt) })
				t.kt = kt
			}
			d.byKernel[t.kt] = t
		}
		d.k.ArmTimer(t.kt, a.at)
		if d.callLog != nil {
			*d.callLog = append(*d.callLog, fmt.Sprintf("%d arm %d at %d func %v", d.k.Now(), t.kt, a.at, t.f != nil))
		}
	}
}

// timerFired is the kernel timer kt of the agent's clock passing.
func (d *Agent) timerFired(kt int32) {
	t := d.byKernel[kt]
	if t == nil || d.stopped {
		return
	}
	d.mu.Lock()
	fire := t.armed && !t.dirty // a change not yet synced supersedes this arming
	if fire {
		t.armed = false
	}
	d.mu.Unlock()
	if !fire {
		return
	}
	d.now.Store(int64(d.k.Now()))
	d.awake.Store(true)
	if d.callLog != nil {
		*d.callLog = append(*d.callLog, fmt.Sprintf("%d fire %d func %v", d.k.Now(), kt, t.f != nil))
	}
	delete(d.byKernel, kt)
	d.free = append(d.free, kt)
	t.kt = -1
	if t.f != nil {
		// The callback (HoldFor or RunFor passing) is the only goroutine
		// that runs at first: the first freezer call is its own.
		d.byTimer = true
		d.spawn <- t.f
	} else {
		select {
		case t.ch <- d.time():
		default:
		}
	}
	d.drain()
}

func (d *Agent) time() time.Time { return epoch.Add(time.Duration(d.now.Load())) }

// change records t's new state. Caller holds d.mu.
func (d *Agent) change(t *simTimer) {
	if !t.dirty {
		t.dirty = true
		d.timers = append(d.timers, t)
	}
}

// simClock is the agent's clock: the simulated one.
type simClock struct{ d *Agent }

func (c simClock) Now() time.Time { return c.d.time() }

func (c simClock) NewTimer(dur time.Duration) agent.Timer {
	t := &simTimer{d: c.d, ch: make(chan time.Time, 1), kt: -1, seq: 0}
	t.Reset(dur)
	return t
}

func (c simClock) AfterFunc(dur time.Duration, f func()) agent.Timer {
	t := &simTimer{d: c.d, f: f, kt: -1, seq: c.d.funcs.Add(1)}
	t.Reset(dur)
	return t
}

func (t *simTimer) C() <-chan time.Time { return t.ch }

// Stop disarms t; a fire not yet received is dropped, as time.Timer's
// since Go 1.23.
func (t *simTimer) Stop() bool {
	t.d.touch("timer stop")
	t.d.mu.Lock()
	defer t.d.mu.Unlock()
	was := t.armed
	if t.ch != nil {
		select {
		case <-t.ch:
			was = true
		default:
		}
	}
	t.armed = false
	t.d.change(t)
	return was
}

func (t *simTimer) Reset(dur time.Duration) {
	t.d.touch("timer reset")
	t.d.mu.Lock()
	defer t.d.mu.Unlock()
	if t.ch != nil {
		select {
		case <-t.ch:
		default:
		}
	}
	t.at, t.armed = kernel.Time(t.d.now.Load())+kernel.Time(max(dur, 0)), true
	t.d.change(t)
}

// simWatcher is the agent's watcher: the kernel's thresholds.
type simWatcher struct{ d *Agent }

func (w simWatcher) Watch(cg host.Cgroup, wk host.Wake) error {
	var err error
	w.d.call("watch", cg, func() {
		var m int32
		if m, err = w.d.H.id(cg); err != nil {
			return
		}
		dirtied := memcg.NoLimit
		if w.d.Tracker && wk.DirtiedAbove != 0 {
			dirtied = wk.DirtiedAbove
		}
		w.d.k.Watch(m, wk.UsageAbove, dirtied)
	})
	return err
}

func (w simWatcher) Unwatch(cg host.Cgroup) {
	w.d.call("watch", cg, func() {
		if m, err := w.d.H.id(cg); err == nil {
			w.d.k.Watch(m, memcg.NoLimit, memcg.NoLimit)
		}
	})
}

func (w simWatcher) Events() <-chan host.Cgroup { return w.d.events }

// Close leaves the channel open: the kernel's report timers may still
// fire, and send without blocking to no one.
func (w simWatcher) Close() error { return nil }

// agentHost is the Host as the agent calls it: every call runs on the
// driver's goroutine in its turn.
type agentHost struct{ d *Agent }

var (
	_ host.Host         = agentHost{}
	_ host.Freezer      = agentHost{}
	_ host.DirtyCounter = agentHost{}
	_ host.FastPath     = agentHost{}
)

func (h agentHost) Cgroups(ctx context.Context) (cgs []host.Cgroup, err error) {
	h.d.call("cgroups", "", func() { cgs, err = h.d.H.Cgroups(ctx) })
	return cgs, err
}

func (h agentHost) Observe(ctx context.Context, cg host.Cgroup) (s memcg.Stat, err error) {
	h.d.call("observe", cg, func() {
		if cg != "/" {
			h.d.Steps++
		}
		s, err = h.d.H.Observe(ctx, cg)
		if h.d.callLog != nil {
			*h.d.callLog = append(*h.d.callLog, fmt.Sprintf("  = dirty %d wb %d usage %d", s.Dirty, s.Writeback, s.Usage))
		}
	})
	return s, err
}

func (h agentHost) Dirtied(ctx context.Context, cg host.Cgroup) (n uint64, err error) {
	h.d.call("dirtied", cg, func() { n, err = h.d.H.Dirtied(ctx, cg) })
	return n, err
}

func (h agentHost) Reclaim(ctx context.Context, cg host.Cgroup, n uint64) (got uint64, err error) {
	h.d.call("reclaim", cg, func() { got, err = h.d.H.Reclaim(ctx, cg, n) })
	return got, err
}

func (h agentHost) WriteOut(ctx context.Context, cg host.Cgroup) (w host.WriteOut, err error) {
	h.d.call("write out", cg, func() { w, err = h.d.H.WriteOut(ctx, cg) })
	return w, err
}

func (h agentHost) Flush(ctx context.Context, cg host.Cgroup) (err error) {
	h.d.call("flush", cg, func() { err = h.d.H.Flush(ctx, cg) })
	return err
}

// Pause stops cg's tasks for d of simulated time and returns at once, as
// Host.Pause does: the agent's open-loop pause then ends when the
// simulated kernel resumes them, not on the agent's clock.
func (h agentHost) Pause(ctx context.Context, cg host.Cgroup, d time.Duration) (err error) {
	h.d.call("pause", cg, func() { err = h.d.H.Pause(ctx, cg, d) })
	return err
}

func (h agentHost) Now() time.Time { return h.d.time() }

func (h agentHost) Freeze(ctx context.Context, cg host.Cgroup) (f host.Frozen, err error) {
	h.d.call("freeze", cg, func() { err = h.d.H.Freeze(ctx, cg) })
	if err != nil {
		return nil, err
	}
	return &simEpisode{d: h.d, cg: cg}, nil
}

func (h agentHost) DirtyPath() host.DirtyPath {
	if h.d.Tracker {
		return host.DirtyPath{Tracker: true}
	}
	return host.DirtyPath{Reason: "the simulated host polls"}
}

func (h agentHost) ThrottleUnavailable(host.Cgroup) string { return "" }

// simEpisode is a throttle episode on the simulated kernel.
type simEpisode struct {
	d     *Agent
	cg    host.Cgroup
	ended bool // agent's: one goroutine at a time holds the episode (its throttle lock)
}

func (e *simEpisode) Thaw() (err error) {
	e.d.call("freeze", e.cg, func() {
		if e.d.byTimer {
			e.d.byTimer = false
			e.d.DriverThaws++
		}
		err = e.d.H.Thaw(context.Background(), e.cg)
	})
	return err
}

func (e *simEpisode) Refreeze() (err error) {
	e.d.call("freeze", e.cg, func() {
		if e.d.byTimer {
			e.d.byTimer = false
			e.d.DriverFreezes++
		}
		err = e.d.H.Freeze(context.Background(), e.cg)
	})
	return err
}

func (e *simEpisode) End() (err error) {
	if e.ended {
		return nil
	}
	e.ended = true
	e.d.call("freeze", e.cg, func() {
		if e.d.H.IsFrozen(e.cg) {
			err = e.d.H.Thaw(context.Background(), e.cg)
		}
	})
	return err
}
