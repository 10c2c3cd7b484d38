package agent

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/overrides"
	"github.com/memcgd/memcgd/policy"
	"github.com/memcgd/memcgd/resolve"
	"github.com/memcgd/memcgd/state"
)

// Defaults of Options.
const (
	DefaultWorkers        = 2
	DefaultActiveInterval = 50 * time.Millisecond
	DefaultScanInterval   = 30 * time.Second
	DefaultAuditInterval  = 5 * time.Minute
	// DefaultReclaimStep bounds the reclaim of one step, so that one
	// cgroup's reclaim cannot hold a worker while others wait: workers go
	// round-robin over the active cgroups between steps.
	DefaultReclaimStep = 8 << 20
	// DefaultStopTimeout bounds how long Run waits at shutdown for the
	// host calls in flight. Pauses end at once when Run's context is done
	// and a reclaim step is one bounded write, so this is only reached by
	// a call stuck in the kernel; the caller's undo must not wait for it.
	DefaultStopTimeout = time.Second
	// DefaultReaction is the agent's reaction delay as the policy
	// anticipates it (policy.Input.Reaction): from a wake-up or a
	// deadline to the step it triggers. A step of one cgroup reads a few
	// cgroupfs files; a millisecond covers it on an idle node.
	DefaultReaction = time.Millisecond
)

// Options configure an Agent.
type Options struct {
	// Host is the kernel: the real cgroupfs or the simulator.
	Host host.Host
	// Watcher wakes the agent on cgroup events; nil means the agent only
	// finds cgroups in need by its scans.
	Watcher host.Watcher
	// Config is the policy to start with.
	Config *config.Config
	// Overrides are runtime knob settings; nil means none.
	Overrides *overrides.Overrides
	// Self are the daemon's own cgroups, one path per hierarchy it is in
	// (memory, unified, v1 freezer), as in /proc/self/cgroup. A cgroup
	// that is one of them or an ancestor of one holds the daemon: it is
	// never paused (the daemon would freeze itself and never thaw) nor
	// reclaimed (see step), and its Status.Exempt says so.
	Self []host.Cgroup
	// Workers bounds how many cgroups are worked on at once.
	Workers int
	// ActiveInterval is the longest the policy lets an active cgroup go
	// unobserved (policy.Input.ActiveInterval, the ceiling of NextLook);
	// also how long an ancestor's reading is reused.
	ActiveInterval time.Duration
	// ScanInterval is how often the subtree is listed for new and removed
	// cgroups; AuditInterval how often every idle cgroup is observed, to
	// catch what the watcher cannot see (dirtying of already-cached pages).
	ScanInterval, AuditInterval time.Duration
	// ReclaimStep bounds the bytes reclaimed in one step.
	ReclaimStep uint64
	// StopTimeout bounds how long Run waits, once its context is done,
	// for the host calls in flight (DefaultStopTimeout if zero).
	StopTimeout time.Duration
	// Reaction is the agent's reaction delay the policy anticipates
	// (DefaultReaction if zero).
	Reaction time.Duration
	// Clock is the agent's time for its schedule and the throttle's
	// deadlines; nil is the wall clock. Tests drive the loop on a fake.
	Clock Clock
	// Log receives the agent's logs; nil discards them.
	Log *slog.Logger
}

// Agent is memcgd's daemon loop. Create it with New and start it with Run.
// The package documentation states which goroutine owns what and the lock
// order.
type Agent struct {
	opts  Options      // read-only after New
	log   *slog.Logger // read-only after New
	clock Clock        // read-only after New
	// tracker says the dirty tracker is in force (policy.Input.Tracker),
	// tracking its reason when not; read-only after New.
	tracker  bool
	tracking string
	// scanned is set by the loop once its first scan is done (Ready).
	scanned atomic.Bool

	// work carries cgroups from the loop to the workers; done carries
	// each step's outcome back. paused carries the end of each pause
	// back to the loop. Each result is sent only while Run's context is
	// live, so a worker never blocks on a loop that has stopped.
	work   chan *cgroupState
	done   chan stepResult
	paused chan pauseResult

	// Requests to the loop from any goroutine, buffered: a request that
	// finds rescan or restep full is one already pending; a kick that
	// finds kick full becomes a scan.
	rescan chan struct{}
	restep chan struct{}    // a reload: step every cgroup under the new config
	kick   chan host.Cgroup // a cgroup whose settings changed
	// due carries cgroups whose throttle deadline passed (a thaw or a
	// refreeze by the cgroup's timer), to be stepped now.
	due chan *cgroupState

	// flushing holds a token while a full flush runs: at most one at a
	// time, off the worker pool, since a flush (syncfs) waits for the
	// device and cannot be cancelled.
	flushing chan struct{}

	// running counts the goroutines Run waits for at shutdown (workers,
	// pauses, the flush), within StopTimeout.
	running sync.WaitGroup
	// calls records the host calls in flight, for the shutdown report.
	calls inflight

	mu      sync.Mutex // guards cfg and cgroups and the fields of each cgroupState marked "mu"
	cfg     *config.Config
	cgroups map[host.Cgroup]*cgroupState

	ancMu     sync.Mutex               // guards ancestors
	ancestors map[host.Cgroup]observed // readings of ancestors, reused by steps (ancestry)
}

// pauseResult reports a finished open-loop pause (policy.FreezerTimed).
type pauseResult struct {
	st  *cgroupState
	d   time.Duration
	err error
}

// cgroupState is what the agent keeps per managed cgroup, from the scan
// that finds it until the loop forgets it. A cgroup removed and created
// again under the same path gets a new cgroupState: results that come
// back for the old one are dropped.
type cgroupState struct {
	cg host.Cgroup // read-only
	// exempt is why the daemon must neither pause nor reclaim the cgroup
	// (HoldsMemcgd), "" when it may. Set at creation, read-only after.
	exempt string

	// loop-owned
	scheduled bool      // queued, running, pausing or in the timer heap
	timed     bool      // scheduled by its timer entry alone
	timerSeq  uint64    // the seq of its live timer entry; older ones are stale
	again     bool      // woken while a worker had it: step again at once
	active    bool      // the last decision's Active
	throttled bool      // a throttle episode is open: first in the queue
	wake      host.Wake // the thresholds of the current watch
	gone      bool      // forgotten: never scheduled again, its results dropped

	// worker-owned: only the worker stepping the cgroup touches these, and
	// the loop hands a cgroup to one worker at a time (scheduled).
	ctrl *policy.Controller
	// acting is set while the cgroup's write-out, flush or reclaim runs
	// (actOrHandOff), on the worker or on a goroutine of its own; backoff
	// belongs to whoever set it.
	acting  atomic.Bool
	backoff reclaimBackoff
	// flushBackoff spaces out full flushes of a cgroup the host found
	// nothing to flush for (no open file on a filesystem it may sync:
	// each request still lists the cgroup's files), as backoff does
	// reclaim; guarded by Agent.mu, since the flush reports from its own
	// goroutine.
	flushBackoff reclaimBackoff
	// unavailable is why no freezer reaches this cgroup (the host said
	// so): it is then never frozen nor paused. Set by the worker, or by
	// the loop as a pause ends, while no worker has the cgroup.
	unavailable string

	// thr is the closed-loop throttle's freezer state, with a lock of
	// its own: its timers act on it between steps.
	thr throttle

	status state.Status // mu
}

// stepResult is a worker's report to the loop: the decision's schedule.
type stepResult struct {
	st        *cgroupState
	active    bool
	throttled bool
	wake      host.Wake
	keepWake  bool // no decision: leave the watch as it is
	vanish    bool
	at        time.Time     // the agent's clock when the step began
	next      time.Duration // step again this long after at; 0: only when woken
	pause     time.Duration // an open-loop pause to take before the next step
}

// New returns an agent; it does nothing until Run.
func New(o Options) (*Agent, error) {
	if o.Host == nil || o.Config == nil {
		return nil, errors.New("agent: Host and Config are required")
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.ActiveInterval <= 0 {
		o.ActiveInterval = DefaultActiveInterval
	}
	if o.ScanInterval <= 0 {
		o.ScanInterval = DefaultScanInterval
	}
	if o.AuditInterval <= 0 {
		o.AuditInterval = DefaultAuditInterval
	}
	if o.ReclaimStep == 0 {
		o.ReclaimStep = DefaultReclaimStep
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = DefaultStopTimeout
	}
	if o.Reaction <= 0 {
		o.Reaction = DefaultReaction
	}
	clock := o.Clock
	if clock == nil {
		clock = wallClock{}
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tracker, tracking := trackerInForce(o.Host)
	a := &Agent{
		opts:      o,
		log:       log,
		clock:     clock,
		tracker:   tracker,
		tracking:  tracking,
		due:       make(chan *cgroupState, 64),
		work:      make(chan *cgroupState),
		done:      make(chan stepResult, o.Workers),
		paused:    make(chan pauseResult, o.Workers),
		rescan:    make(chan struct{}, 1),
		restep:    make(chan struct{}, 1),
		kick:      make(chan host.Cgroup, 16),
		flushing:  make(chan struct{}, 1),
		cfg:       o.Config,
		cgroups:   map[host.Cgroup]*cgroupState{},
		ancestors: map[host.Cgroup]observed{},
	}
	a.calls.slow = func(c call, took time.Duration) {
		// To tell, beside the unpaced writer's samples, a step held by
		// the kernel from a late wake-up.
		log.Debug("slow host call", "cgroup", c.cg, "call", c.what, "took", took)
	}
	return a, nil
}

// trackerInForce says whether the host has a dirty tracker in force
// (host.FastPath), and if not, why.
func trackerInForce(h host.Host) (bool, string) {
	fp, ok := h.(host.FastPath)
	if !ok {
		return false, "the host has no dirty tracker"
	}
	p := fp.DirtyPath()
	if p.Tracker {
		return true, ""
	}
	if p.Reason == "" {
		return false, "the dirty tracker is not loaded"
	}
	return false, p.Reason
}

// DirtyTracking returns the dirty-tracking path in force,
// state.TrackingTracker or state.TrackingPoll, and why not the tracker.
func (a *Agent) DirtyTracking() (path, why string) {
	if a.tracker {
		return state.TrackingTracker, ""
	}
	return state.TrackingPoll, a.tracking
}

// Reload replaces the running policy; the next scan and steps use it.
func (a *Agent) Reload(c *config.Config) {
	a.mu.Lock()
	a.cfg = c
	a.mu.Unlock()
	// Every cgroup, idle ones too, must take the new thresholds now (and
	// re-arm its watch on them), not at the next audit.
	select {
	case a.restep <- struct{}{}:
	default:
	}
}

func (a *Agent) requestScan() {
	select {
	case a.rescan <- struct{}{}:
	default:
	}
}

// Status returns the daemon's view of cg, or of every managed cgroup when
// cg is "".
func (a *Agent) Status(cg host.Cgroup) ([]state.Status, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if cg != "" {
		st, ok := a.cgroups[cg]
		if !ok {
			return nil, fmt.Errorf("cgroup %s is not managed by memcgd", cg)
		}
		return []state.Status{st.status}, nil
	}
	out := make([]state.Status, 0, len(a.cgroups))
	for _, st := range a.cgroups {
		out = append(out, st.status)
	}
	state.Sort(out)
	return out, nil
}

// Knobs returns the knobs in force for cg: config defaults, matching
// rules, then runtime overrides.
func (a *Agent) Knobs(cg host.Cgroup) memcg.Knobs {
	a.mu.Lock()
	cfg := a.cfg
	a.mu.Unlock()
	return resolve.Knobs(cfg, a.opts.Overrides, cg)
}

// Run runs the loop until ctx is done. Every pause in progress is ended
// before Run returns, unless a host call is stuck in the kernel: Run waits
// at most StopTimeout for the calls in flight, then logs those still
// running and returns, so that the caller's undo always runs.
func (a *Agent) Run(ctx context.Context) error {
	if path, why := a.DirtyTracking(); why != "" {
		a.log.Info("dirty tracking", "path", path, "reason", why)
	} else {
		a.log.Info("dirty tracking", "path", path)
	}
	for range a.opts.Workers {
		a.running.Add(1)
		go func() {
			defer a.running.Done()
			for st := range a.work {
				r := a.step(ctx, st)
				select {
				case a.done <- r:
				case <-ctx.Done():
				}
			}
		}()
	}
	err := a.loop(ctx)
	close(a.work)
	stopped := make(chan struct{})
	go func() {
		a.running.Wait() // pauses in flight thaw their cgroups on ctx.Done
		close(stopped)
	}()
	// End every open throttle episode (thawed, journal done) now, not
	// after the workers: a worker stuck in the kernel must not keep a
	// cgroup frozen. An episode whose worker is mid-step ends when the
	// step's freezer call returns, within the same bound.
	ended := make(chan struct{})
	go func() {
		a.mu.Lock()
		sts := make([]*cgroupState, 0, len(a.cgroups))
		for _, st := range a.cgroups {
			sts = append(sts, st)
		}
		a.mu.Unlock()
		for _, st := range sts {
			a.closeThrottle(st)
		}
		<-stopped
		close(ended)
	}()
	t := time.NewTimer(a.opts.StopTimeout)
	defer t.Stop()
	select {
	case <-ended:
	case <-t.C:
		// The goroutines left behind exit when their calls return; their
		// sends select on ctx, so none blocks on the stopped loop.
		a.log.Error("stopping with host calls still in flight", "waited", a.opts.StopTimeout,
			"calls", a.calls.list(time.Now()))
	}
	if a.opts.Watcher != nil {
		a.opts.Watcher.Close()
	}
	return err
}

// loop schedules: events, scans and timers decide which cgroups to step;
// the ready queue hands them to the workers in FIFO order, so every
// active cgroup gets its turn. It owns the scheduling fields of every
// cgroupState.
func (a *Agent) loop(ctx context.Context) error {
	var ready []*cgroupState
	timers := &timerHeap{}
	timer := a.clock.NewTimer(time.Hour)
	defer timer.Stop()
	scan := time.NewTicker(a.opts.ScanInterval)
	defer scan.Stop()
	audit := time.NewTicker(a.opts.AuditInterval)
	defer audit.Stop()
	var events <-chan host.Cgroup
	if a.opts.Watcher != nil {
		events = a.opts.Watcher.Events()
	}

	enqueue := func(st *cgroupState) {
		if st.scheduled || st.gone {
			return
		}
		st.scheduled = true
		if st.throttled {
			// A throttled cgroup is stepped every millisecond or so
			// while its tasks wait: it goes ahead of the round-robin.
			ready = append([]*cgroupState{st}, ready...)
			return
		}
		ready = append(ready, st)
	}
	// wake steps st soon: an event, a kick, a throttle deadline. One
	// waiting in the timer heap is stepped now (its timer entry goes
	// stale), unless it is active and this is but a watcher's hint; one
	// a worker has is stepped again as soon as it is back.
	wake := func(st *cgroupState, hint bool) {
		if st.gone {
			return
		}
		switch {
		case st.timed && (!st.active || !hint):
			st.timed, st.scheduled = false, false
		case st.scheduled && !st.timed && !hint:
			st.again = true
		}
		if hint || a.tracker {
			a.log.Debug("watcher report", "cgroup", st.cg, "timed", st.timed, "active", st.active, "scheduled", st.scheduled, "hint", hint)
		}
		enqueue(st)
	}
	wakeUp := func(cg host.Cgroup, hint bool) {
		a.mu.Lock()
		st := a.cgroups[cg]
		a.mu.Unlock()
		if st != nil {
			wake(st, hint)
		}
	}
	// Subscribe to new and removed cgroups before the first listing, so
	// that none created in between is missed until the next scan.
	var born <-chan host.CgroupEvent
	if n, ok := a.opts.Host.(host.CgroupNotifier); ok {
		ch, err := n.CgroupEvents(ctx)
		if err != nil {
			a.log.Warn("no reports of new cgroups: they wait for the periodic scan", "scan", a.opts.ScanInterval, "err", err)
		} else {
			born = ch
		}
	}
	a.scan(ctx, enqueue, true)
	a.scanned.Store(true)

	for {
		var work chan *cgroupState
		var next *cgroupState
		if len(ready) > 0 {
			work, next = a.work, ready[0]
		}
		if timers.Len() > 0 {
			timer.Reset((*timers)[0].at.Sub(a.clock.Now()))
		}
		select {
		case <-ctx.Done():
			return nil
		case work <- next:
			ready = ready[1:]
		case r := <-a.done:
			if a.finish(ctx, r, timers) {
				enqueue(r.st)
			}
		case st := <-a.due:
			wake(st, false)
		case p := <-a.paused:
			p.st.scheduled = false
			if p.st.gone {
				continue // forgotten during the pause: a newer state may hold its path
			}
			a.endPause(p)
			enqueue(p.st)
		case cg := <-a.kick:
			wakeUp(cg, false)
		case cg, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			// Without the tracker a report of an active cgroup is but a
			// hint (a usage watch armed when it went idle, a PSI
			// event): its NextLook, derived from its dirtying rate,
			// already bounds what it dirties unseen. With the tracker
			// every report is a DirtiedAbove or UsageAbove the last
			// decision armed for this very moment, and NextLook is no
			// bound at all (the policy leaves the dirtying cgroup to
			// the tracker): dropping it let a thawed writer run unseen
			// until NextLook, 36 ms and 70 MiB on the v1 host
			// (test/daemon TestDaemonUnpacedWriterTracker).
			wakeUp(cg, !a.tracker)
		case <-timer.C():
			now := a.clock.Now()
			for timers.Len() > 0 && !(*timers)[0].at.After(now) {
				t := heap.Pop(timers).(timerEntry)
				if !t.st.timed || t.seq != t.st.timerSeq {
					continue // stepped since by an event
				}
				t.st.timed, t.st.scheduled = false, false
				enqueue(t.st)
			}
		case ev, ok := <-born:
			if !ok {
				born = nil
				continue
			}
			a.cgroupEvent(ctx, ev, enqueue)
		case <-scan.C:
			a.scan(ctx, enqueue, false)
		case <-a.rescan:
			a.scan(ctx, enqueue, false)
		case <-a.restep:
			a.scan(ctx, enqueue, true)
		case <-audit.C:
			a.scan(ctx, enqueue, true)
		}
	}
}

// finish takes a step's outcome and carries out its schedule: an
// open-loop pause, the next look, the watch; it forgets a cgroup that
// vanished. The outcome of a step of a cgroup forgotten meanwhile is
// dropped. It reports whether to step the cgroup again at once (it was
// woken during the step).
func (a *Agent) finish(ctx context.Context, r stepResult, timers *timerHeap) bool {
	st := r.st
	if st.gone {
		st.scheduled = false
		return false
	}
	if r.vanish {
		a.forget(st)
		st.scheduled = false
		return false
	}
	st.active, st.throttled = r.active, r.throttled
	a.mu.Lock()
	st.status.Active = r.active
	a.mu.Unlock()
	wk := r.wake
	if r.active {
		// An active cgroup is looked at anyway (NextLook is at most
		// ActiveInterval): its usage watch is armed when it goes idle,
		// and none is armed meanwhile (with the tracker every report
		// steps the cgroup, and a stale v1 threshold reports each
		// crossing, every millisecond for a writer at its limit). Without
		// the tracker the watch is left as it was: its reports of an
		// active cgroup are hints. Re-arming it after every step
		// costs the loop dearly: on v1 a usage threshold is registered
		// and unregistered through cgroup.event_control, each ending in
		// synchronize_rcu() (mm/memcontrol-v1.c,
		// __mem_cgroup_usage_register_event and
		// mem_cgroup_usage_unregister_event), which took 7-111 ms on the
		// loaded v1 host, with the loop and the Watcher's lock (that the
		// tracker's wake-ups go through) held: a thawed writer then ran
		// unseen to its memory limit. The tracker's DirtiedAbove, a map
		// update, is armed after every step.
		wk.UsageAbove = memcg.NoLimit
	}
	if a.opts.Watcher != nil && !r.keepWake && wk != st.wake && (!r.active || a.tracker) {
		end := a.calls.begin(st.cg, "watch")
		err := a.opts.Watcher.Watch(st.cg, wk)
		end()
		if err != nil {
			a.log.Warn("watch", "cgroup", st.cg, "err", err)
		}
		st.wake = wk
	}
	if r.pause > 0 {
		// Open-loop pauses run on their own goroutines so that a
		// throttled cgroup holds no worker; the cgroup is stepped again
		// when it ends.
		st.again = false
		a.running.Add(1)
		go func() {
			defer a.running.Done()
			end := a.calls.begin(st.cg, "pause")
			err := a.opts.Host.Pause(ctx, st.cg, r.pause)
			end()
			select {
			case a.paused <- pauseResult{st: st, d: r.pause, err: err}:
			case <-ctx.Done():
			}
		}()
		return false
	}
	st.scheduled = false
	if st.again {
		st.again = false
		return true
	}
	if r.next > 0 {
		a.at(timers, st, r.at.Add(r.next))
	}
	return false
}

// at puts st in the timer heap, to be stepped at t. Loop only.
func (a *Agent) at(timers *timerHeap, st *cgroupState, t time.Time) {
	st.timerSeq++
	st.timed, st.scheduled = true, true
	heap.Push(timers, timerEntry{at: t, st: st, seq: st.timerSeq})
}

// endPause accounts a finished pause.
func (a *Agent) endPause(p pauseResult) {
	var c state.Counters
	switch {
	case p.err == nil:
		c.Pauses, c.Paused = 1, p.d
	case errors.Is(p.err, errors.ErrUnsupported):
		// No freezer reaches this cgroup; write-out and reclaim still
		// work. Say it once. Written here, by the loop, while the cgroup
		// is with no worker: the next step reads it after the loop hands
		// it over.
		a.unavailable(p.st, p.err.Error())
	case errors.Is(p.err, host.ErrVanished):
	default:
		c.Errors = 1
		a.log.Warn("pause", "cgroup", p.st.cg, "err", p.err)
	}
	a.addCounters(p.st, c)
}

// forget drops st: removes it from the managed set if it is still the
// state there (a cgroup recreated at the same path has a newer one, which
// stays), its cached ancestor reading, and its watch. Loop only.
func (a *Agent) forget(st *cgroupState) {
	st.gone = true
	a.closeThrottle(st) // thaws it, should it be a path reused meanwhile
	a.mu.Lock()
	current := a.cgroups[st.cg] == st
	if current {
		delete(a.cgroups, st.cg)
	}
	a.mu.Unlock()
	if !current {
		return
	}
	a.ancMu.Lock()
	delete(a.ancestors, st.cg)
	a.ancMu.Unlock()
	if a.opts.Watcher != nil {
		a.opts.Watcher.Unwatch(st.cg)
	}
	if f, ok := a.opts.Host.(forgetter); ok {
		f.Forget(st.cg) // the tracker's id, freezer directories it made
	}
	// A cgroup recreated under the same path must not inherit the
	// removed one's runtime overrides (issue 9, defect 11).
	if a.opts.Overrides != nil {
		if err := a.opts.Overrides.Forget(st.cg); err != nil {
			a.log.Warn("forget the overrides of a removed cgroup", "cgroup", st.cg, "err", err)
		}
	}
	a.log.Info("cgroup gone", "cgroup", st.cg)
}

// newState starts the agent's state of cg and registers it. Caller holds
// a.mu.
func (a *Agent) newState(cg host.Cgroup) *cgroupState {
	st := &cgroupState{cg: cg, ctrl: policy.NewController(), wake: host.Wake{UsageAbove: memcg.NoLimit}}
	if holdsSelf(cg, a.opts.Self) {
		st.exempt = HoldsMemcgd
	}
	st.status.Cgroup, st.status.Exempt, st.status.Throttle = cg, st.exempt, st.exempt
	st.status.DirtyTracking, _ = a.DirtyTracking()
	a.cgroups[cg] = st
	return st
}

// bornRelooks are when a cgroup reported created is looked at again after
// its first step: a runtime usually writes the new cgroup's limit just
// after its mkdir, and with limited_only the first step may have found it
// unlimited, so unmanaged.
var bornRelooks = [...]time.Duration{50 * time.Millisecond, 250 * time.Millisecond, time.Second}

// cgroupEvent takes a report of the host's CgroupNotifier: a new cgroup is
// stepped at once (within milliseconds of its mkdir, not at the next
// scan), a removed one forgotten, lost reports make a scan. Loop only.
func (a *Agent) cgroupEvent(ctx context.Context, ev host.CgroupEvent, enqueue func(*cgroupState)) {
	switch {
	case ev.Rescan:
		a.scan(ctx, enqueue, false)
	case ev.Removed:
		a.mu.Lock()
		st := a.cgroups[ev.Cgroup]
		a.mu.Unlock()
		if st != nil {
			a.forget(st)
		}
	default:
		a.mu.Lock()
		st, known := a.cgroups[ev.Cgroup]
		if !known {
			st = a.newState(ev.Cgroup)
		}
		a.mu.Unlock()
		if known {
			return
		}
		if st.exempt != "" {
			a.log.Info(HoldsMemcgd, "cgroup", st.cg, "self", a.opts.Self)
		}
		enqueue(st)
		for _, d := range bornRelooks {
			cg := st.cg
			a.clock.AfterFunc(d, func() {
				select {
				case a.kick <- cg:
				default: // the kick queue is full: the scan finds it
				}
			})
		}
	}
}

// forgetter is a host that keeps per-cgroup resources (cgroupfs.FS: the
// tracker's id and count, freezer directories it made) to drop when the
// agent forgets a cgroup.
type forgetter interface {
	Forget(cg host.Cgroup)
}

// scan lists the managed subtree: new cgroups are stepped once (which
// decides whether they are managed and arms their watch), removed ones
// are forgotten. With all, every known cgroup is stepped too: the audit.
// It also drops ancestor readings too old to be used again, so that the
// cache does not keep removed parents.
func (a *Agent) scan(ctx context.Context, enqueue func(*cgroupState), all bool) {
	a.sweepAncestors(a.opts.Host.Now())
	end := a.calls.begin("", "list cgroups")
	cgs, err := a.opts.Host.Cgroups(ctx)
	end()
	if err != nil {
		a.log.Error("list cgroups", "err", err)
		return
	}
	present := make(map[host.Cgroup]bool, len(cgs))
	var fresh []*cgroupState
	var exempt []host.Cgroup
	a.mu.Lock()
	for _, cg := range cgs {
		present[cg] = true
		st, ok := a.cgroups[cg]
		if !ok {
			st = a.newState(cg)
			if st.exempt != "" {
				exempt = append(exempt, cg)
			}
			fresh = append(fresh, st)
		} else if all {
			fresh = append(fresh, st)
		}
	}
	var gone []*cgroupState
	for cg, st := range a.cgroups {
		if !present[cg] {
			gone = append(gone, st)
		}
	}
	a.mu.Unlock()
	for _, cg := range exempt {
		a.log.Info(HoldsMemcgd, "cgroup", cg, "self", a.opts.Self)
	}
	for _, st := range gone {
		a.forget(st)
	}
	for _, st := range fresh {
		enqueue(st)
	}
}

// step observes one cgroup, asks its controller and carries out the
// decision but for its schedule (the next look, an open-loop pause, the
// watch), which is the loop's: the result.
func (a *Agent) step(ctx context.Context, st *cgroupState) stepResult {
	h := a.opts.Host
	at := a.clock.Now()
	chain, knobs, err := a.ancestry(ctx, st.cg)
	if err != nil {
		if errors.Is(err, host.ErrVanished) {
			return stepResult{st: st, vanish: true}
		}
		a.log.Warn("observe", "cgroup", st.cg, "err", err)
		return stepResult{st: st, active: true, at: at, next: a.opts.ScanInterval, keepWake: true, throttled: st.thr.isOpen()}
	}
	s := chain[len(chain)-1]
	eff := memcg.Resolve(chain, knobs)
	a.mu.Lock()
	managed := a.managed(chain)
	st.status.Managed = managed
	a.mu.Unlock()
	if !managed {
		a.setStatus(st, s, eff, h.Now())
		a.closeThrottleIfOpen(st)
		return stepResult{st: st, wake: host.Wake{UsageAbove: memcg.NoLimit}}
	}
	if dc, ok := h.(host.DirtyCounter); ok {
		// Only for managed cgroups: it reads every task's /proc/PID/io.
		end := a.calls.begin(st.cg, "count dirtied bytes")
		n, err := dc.Dirtied(ctx, st.cg)
		end()
		switch {
		case err == nil:
			s.Counters.HasDirtied, s.Counters.DirtiedBytes = true, n
		case errors.Is(err, host.ErrVanished):
			return stepResult{st: st, vanish: true}
		default:
			a.log.Debug("count dirtied bytes", "cgroup", st.cg, "err", err)
		}
	}
	// A cgroup holding the daemon is written out and flushed, but neither
	// paused nor reclaimed. A pause would freeze the daemon with it, and
	// nothing would thaw it. A v1 reclaim squeezes the hierarchical limit
	// the daemon is charged under, so the daemon's own allocations could
	// fail or OOM in the window. A v2 memory.reclaim stops no task, but it
	// runs in the daemon's own write, takes from the daemon's pages too
	// (its text and heap, in proportion to the subtree), and lasts as long
	// as the kernel needs to find them: the daemon would stall itself. The
	// safe choice is to leave those cgroups to the kernel's own reclaim.
	// Without watermarks the controller never asks for reclaim, and with
	// FreezerNone it never freezes nor pauses.
	pol := eff
	if st.exempt != "" {
		pol.Watermarks = memcg.Watermarks{}
	}
	now := h.Now()
	fz := a.freezer(st)
	d := st.ctrl.Step(policy.Input{
		Now: now, Stat: s, Dirty: pol.Dirty, Watermarks: pol.Watermarks,
		WritebackFirst: pol.Knobs.WritebackFirst,
		// Without this step's counter no DirtiedAbove is armed below, so the
		// policy must keep the dirty-background term in the usage wake.
		Tracker: a.tracker && s.Counters.HasDirtied, Reaction: a.opts.Reaction, ActiveInterval: a.opts.ActiveInterval,
		Freezer: fz, Frozen: fz == policy.FreezerHeld && st.thr.isFrozen(),
	})
	if fz != policy.FreezerTimed {
		d.Pause = 0 // the policy sizes none; a safety net for the exempt
	}
	// The status shows the observation before the actions: one that
	// blocks in the kernel must not hide what the daemon saw.
	a.setStatus(st, s, eff, now)
	// The freezer first, against the Decision's order: a freeze or a
	// thaw is due now (a few hundred µs after the observation), while a
	// write-out or a v1 reclaim step can take tens of milliseconds, in
	// which a fast writer would dirty tens of MiB more, or a drained
	// cgroup stay frozen. Neither needs the tasks running.
	var c state.Counters
	if fz == policy.FreezerHeld {
		tc, why := a.carry(ctx, st, d)
		c = tc
		if why != "" {
			a.unavailable(st, why)
		}
	}
	a.addCounters(st, c)
	deferred, vanished := a.actOrHandOff(ctx, st, s, d)
	if vanished {
		return stepResult{st: st, vanish: true}
	}
	r := stepResult{st: st, active: d.Active, throttled: d.Episode, at: at, next: d.NextLook, pause: d.Pause,
		wake: host.Wake{UsageAbove: d.Wake.UsageAbove}}
	if a.tracker && s.Counters.HasDirtied && d.Wake.DirtiedAbove != memcg.NoLimit {
		r.wake.DirtiedAbove = satAdd(s.Counters.DirtiedBytes, d.Wake.DirtiedAbove)
	}
	if a.log.Enabled(ctx, slog.LevelDebug) && (d.Active || !d.Idle()) {
		// One line per decision of a cgroup at work, to set beside
		// samples of the cgroup (the unpaced writer's test prints them).
		a.log.Debug("decision", "cgroup", st.cg, "throttle", d.Throttle, "episode", d.Episode,
			"dirty", s.Dirty, "writeback", s.Writeback, "dirtied", s.Counters.DirtiedBytes,
			"next", d.NextLook, "hold_for", d.HoldFor, "run_for", d.RunFor,
			"wake_dirtied", d.Wake.DirtiedAbove, "write_out", d.WriteOut, "reclaim", d.Reclaim,
			"rate", st.ctrl.DirtyRate(), "bw", st.ctrl.WriteBandwidth(), "why", d.Why)
	}
	if deferred && !d.WriteOut && !d.Flush && d.Pause == 0 && !d.Episode && s.DirtyAndWriteback() < eff.Dirty.Background {
		// Reclaim is all there is to do and it is backing off: wait,
		// idle, until the backoff ends or the cgroup grows by a step
		// (which may be page cache that ends it).
		r.active = false
		r.next = max(st.backoff.until.Sub(now), a.opts.ActiveInterval)
		r.wake.UsageAbove = backoffWake(s, eff.Dirty, a.opts.ReclaimStep)
	}
	return r
}

// actOrHandOff carries out d's write-out, flush and reclaim (act). While a
// throttle episode is open, or the decision writes out, it does so on a
// goroutine of its own and returns at once: the cgroup is stepped every
// millisecond or so then, and a write-out or a v1 reclaim step taking
// tens of milliseconds would hold back the next look, and the next thaw
// or freeze, by as much. A write-out is handed off before any episode
// too: it is due when dirty passes the background threshold, which a
// fast writer does on its way to the limit, and on the v1 host the
// write-out of a file being written at 1.5 GB/s held its step, and so
// the cgroup's next look (due 1 ms later), for 33 ms, in which the
// writer reached its memory limit. A step that finds the previous one's
// actions still running skips its own: a write-out in flight is one
// already started, and reclaim comes again at the next step.
func (a *Agent) actOrHandOff(ctx context.Context, st *cgroupState, s memcg.Stat, d policy.Decision) (deferred, vanished bool) {
	if !d.WriteOut && !d.Flush && d.Reclaim == 0 && !d.ReclaimStart {
		return false, false
	}
	if !st.acting.CompareAndSwap(false, true) {
		return false, false
	}
	if !d.Episode && !d.WriteOut {
		defer st.acting.Store(false)
		c, deferred, vanished := a.act(ctx, st, s, d)
		a.addCounters(st, c)
		return deferred, vanished
	}
	a.running.Add(1) // the calling worker is counted: Run's Wait has not returned
	go func() {
		defer a.running.Done()
		defer st.acting.Store(false)
		c, _, _ := a.act(ctx, st, s, d) // a vanished cgroup is found by the next step
		a.addCounters(st, c)
	}()
	return false, false
}

// freezer says how the agent can stop st's tasks: not at all when they
// hold the daemon or no freezer reaches them; held across steps when the
// host can (the closed loop); for a given time otherwise (Host.Pause).
func (a *Agent) freezer(st *cgroupState) policy.Freezer {
	if st.exempt != "" || st.unavailable != "" {
		return policy.FreezerNone
	}
	if _, ok := a.opts.Host.(host.Freezer); ok {
		return policy.FreezerHeld
	}
	return policy.FreezerTimed
}

// unavailable records that no freezer reaches st, and why: it is never
// frozen nor paused again, and its status says so. Called with no worker
// but the caller's on st.
func (a *Agent) unavailable(st *cgroupState, why string) {
	if st.unavailable != "" {
		return
	}
	st.unavailable = why
	a.mu.Lock()
	st.status.Throttle = "throttle unavailable: " + why
	a.mu.Unlock()
	a.log.Warn("throttle unavailable", "cgroup", st.cg, "reason", why)
}

// closeThrottleIfOpen ends st's open episode, if any, leaving it able to
// open another: the cgroup is no longer managed.
func (a *Agent) closeThrottleIfOpen(st *cgroupState) {
	t := &st.thr
	var c state.Counters
	t.mu.Lock()
	t.gen++
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	if t.episode != nil {
		a.endLocked(st, &c)
	}
	t.mu.Unlock()
	a.addCounters(st, c)
}

// act carries out d's write-out, flush and reclaim for the cgroup observed
// as s; the freezer is carry's, the schedule the loop's. It returns what
// it did, whether reclaim was wanted but deferred by the backoff, and
// whether the cgroup vanished.
func (a *Agent) act(ctx context.Context, st *cgroupState, s memcg.Stat, d policy.Decision) (c state.Counters, deferred, vanished bool) {
	h := a.opts.Host
	fail := func(what string, err error) bool {
		if err == nil {
			return false
		}
		if errors.Is(err, host.ErrVanished) {
			return true
		}
		c.Errors++
		a.log.Warn(what, "cgroup", st.cg, "err", err)
		return false
	}
	switch {
	case d.Flush:
		a.mu.Lock()
		allow := st.flushBackoff.allow(a.clock.Now(), s, a.opts.ReclaimStep)
		a.mu.Unlock()
		if !allow {
			a.log.Debug("flush skipped: backing off, nothing to flush lately", "cgroup", st.cg)
		} else if a.startFlush(ctx, st, s) {
			c.Flushes++
			c.FlushBytes += s.Dirty
		}
	case d.WriteOut:
		end := a.calls.begin(st.cg, "write out")
		w, err := h.WriteOut(ctx, st.cg)
		end()
		if w.Files > 0 {
			// Only write-outs that found files count: the dirty pages
			// of files no task holds open are out of its reach.
			c.WriteOuts++
			c.WriteOutBytes += w.Bytes
		}
		vanished = fail("write out", err)
	}
	if d.ReclaimStart {
		c.ReclaimRuns++ // seed 001's pgoutrun: the policy says when a run starts
	}
	if d.Reclaim > 0 && !vanished {
		now := h.Now()
		if !st.backoff.allow(now, s, a.opts.ReclaimStep) {
			deferred = true
		} else {
			end := a.calls.begin(st.cg, "reclaim")
			got, err := h.Reclaim(ctx, st.cg, min(d.Reclaim, a.opts.ReclaimStep))
			end()
			c.ReclaimedBytes += got
			nothing := errors.Is(err, host.ErrNothingReclaimed)
			if !nothing {
				vanished = fail("reclaim", err)
			}
			st.backoff.record(now, s, err != nil && !vanished, a.opts.ActiveInterval)
			if st.backoff.fails > 0 {
				a.log.Debug("reclaim attempt", "cgroup", st.cg, "got", got, "err", err,
					"failures", st.backoff.fails, "retry_in", st.backoff.until.Sub(now))
			} else {
				a.log.Debug("reclaim attempt", "cgroup", st.cg, "got", got)
			}
		}
	}
	return c, deferred, vanished
}

// startFlush starts a full flush of the filesystems st's cgroup writes to
// on a goroutine of its own, unless one is in flight already (of any
// cgroup), and reports whether it did. A flush waits for the device
// (syncfs) and cannot be cancelled; on the pool it would hold a worker
// from every other cgroup for as long.
func (a *Agent) startFlush(ctx context.Context, st *cgroupState, s memcg.Stat) bool {
	if ctx.Err() != nil {
		return false
	}
	select {
	case a.flushing <- struct{}{}:
	default:
		a.log.Debug("flush skipped: another is in flight", "cgroup", st.cg)
		return false
	}
	a.running.Add(1) // the calling worker is counted: Run's Wait has not returned
	go func() {
		defer a.running.Done()
		defer func() { <-a.flushing }()
		end := a.calls.begin(st.cg, "flush")
		err := a.opts.Host.Flush(ctx, st.cg)
		end()
		a.mu.Lock()
		st.flushBackoff.record(a.clock.Now(), s, errors.Is(err, host.ErrNothingToFlush), flushBackoffBase)
		a.mu.Unlock()
		switch {
		case err == nil, errors.Is(err, host.ErrVanished):
		case errors.Is(err, host.ErrRateLimited), errors.Is(err, host.ErrNothingToFlush):
			// Refused, not failed: counted apart.
			a.log.Debug("flush refused", "cgroup", st.cg, "err", err)
			a.addCounters(st, state.Counters{FlushesRefused: 1})
		default:
			a.log.Warn("flush", "cgroup", st.cg, "err", err)
			a.addCounters(st, state.Counters{Errors: 1})
		}
	}()
	return true
}

// flushBackoffBase is the first wait after a full flush found nothing to
// flush; it doubles up to MaxReclaimBackoff while that goes on.
const flushBackoffBase = time.Second

// satAdd is a+b, at most memcg.NoLimit.
func satAdd(a, b uint64) uint64 {
	if a > memcg.NoLimit-b {
		return memcg.NoLimit
	}
	return a + b
}

func (a *Agent) setStatus(st *cgroupState, s memcg.Stat, eff memcg.Effective, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st.status.Stat, st.status.Effective, st.status.Observed = s, eff, now
}

// addCounters adds c to the cgroup's counters.
func (a *Agent) addCounters(st *cgroupState, c state.Counters) {
	if c == (state.Counters{}) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	st.status.Counters = addCounters(st.status.Counters, c)
}

// addCounters returns t + c.
func addCounters(t, c state.Counters) state.Counters {
	t.ReclaimedBytes += c.ReclaimedBytes
	t.ReclaimRuns += c.ReclaimRuns
	t.WriteOuts += c.WriteOuts
	t.WriteOutBytes += c.WriteOutBytes
	t.Flushes += c.Flushes
	t.FlushBytes += c.FlushBytes
	t.FlushesRefused += c.FlushesRefused
	t.Pauses += c.Pauses
	t.Paused += c.Paused
	t.Errors += c.Errors
	return t
}

// managed reports whether the config manages the last cgroup of chain:
// under the managed subtree, and, with limited_only, limited by itself or
// an ancestor below the root. Caller holds a.mu.
func (a *Agent) managed(chain []memcg.Stat) bool {
	if !a.cfg.LimitedOnly {
		return true
	}
	for _, s := range chain[1:] {
		if s.Limit != memcg.NoLimit {
			return true
		}
	}
	return false
}

// ancestry observes cg and its ancestors, root first, with their knobs.
// An ancestor read within the last ActiveInterval is reused: siblings
// stepped together share their parents, and an audit of thousands of
// cgroups would otherwise read the same few ancestors thousands of times.
// One read up to StaleAncestor ago is reused too, and read again off the
// step: an ancestor's reading only scales ratio limits by its page cache
// (memcg.EffectiveDirtyLimits), which a few hundred ms do not change
// much, while a read of a high ancestor's memory.stat (the root's sums
// the whole hierarchy) took 25-70 ms on the loaded v1 host, on the step
// of a throttled writer, which dirtied tens of MiB meanwhile.
func (a *Agent) ancestry(ctx context.Context, cg host.Cgroup) ([]memcg.Stat, []memcg.Knobs, error) {
	paths := Ancestors(cg)
	chain := make([]memcg.Stat, len(paths))
	knobs := make([]memcg.Knobs, len(paths))
	now := a.opts.Host.Now()
	for i, p := range paths {
		self := i == len(paths)-1
		s, age, ok := a.cachedAncestor(p, now)
		if !self && ok && age >= a.opts.ActiveInterval {
			a.refreshAncestor(ctx, p)
		}
		if self || !ok {
			var err error
			end := a.calls.begin(p, "observe")
			s, err = a.opts.Host.Observe(ctx, p)
			end()
			if err != nil {
				return nil, nil, err
			}
			if !self {
				a.ancMu.Lock()
				a.ancestors[p] = observed{stat: s, at: now}
				a.ancMu.Unlock()
			}
		}
		chain[i], knobs[i] = s, a.Knobs(p)
	}
	return chain, knobs, nil
}

// StaleAncestor is the oldest an ancestor's reading may be and still be
// used by a step, while a newer one is read off the step (ancestry).
const StaleAncestor = time.Second

// observed is an ancestor's reading and when it was taken; refreshing
// says a read of it is in flight off the steps.
type observed struct {
	stat       memcg.Stat
	at         time.Time
	refreshing bool
}

// refreshAncestor reads p again on a goroutine of its own, unless a read
// is in flight already, and keeps the reading for the next steps.
func (a *Agent) refreshAncestor(ctx context.Context, p host.Cgroup) {
	a.ancMu.Lock()
	o, ok := a.ancestors[p]
	if !ok || o.refreshing || ctx.Err() != nil {
		a.ancMu.Unlock()
		return
	}
	o.refreshing = true
	a.ancestors[p] = o
	a.ancMu.Unlock()
	a.running.Add(1) // the calling worker is counted: Run's Wait has not returned
	go func() {
		defer a.running.Done()
		at := a.opts.Host.Now()
		end := a.calls.begin(p, "observe")
		s, err := a.opts.Host.Observe(ctx, p)
		end()
		a.ancMu.Lock()
		defer a.ancMu.Unlock()
		cur, ok := a.ancestors[p]
		switch {
		case !ok:
			// Swept or forgotten meanwhile: the next step reads it.
		case err != nil:
			cur.refreshing = false
			a.ancestors[p] = cur
		default:
			a.ancestors[p] = observed{stat: s, at: at}
		}
	}()
}

// sweepAncestors drops the ancestor readings too old to be reused.
func (a *Agent) sweepAncestors(now time.Time) {
	a.ancMu.Lock()
	defer a.ancMu.Unlock()
	for p, o := range a.ancestors {
		if now.Sub(o.at) >= StaleAncestor {
			delete(a.ancestors, p)
		}
	}
}

// cachedAncestor returns p's last reading, if it is younger than
// StaleAncestor, and its age.
func (a *Agent) cachedAncestor(p host.Cgroup, now time.Time) (memcg.Stat, time.Duration, bool) {
	a.ancMu.Lock()
	defer a.ancMu.Unlock()
	o, ok := a.ancestors[p]
	age := now.Sub(o.at)
	if !ok || age >= StaleAncestor {
		delete(a.ancestors, p)
		return memcg.Stat{}, 0, false
	}
	return o.stat, age, true
}

// Ancestors returns cg's path and its ancestors', root first.
func Ancestors(cg host.Cgroup) []host.Cgroup {
	var out []host.Cgroup
	for p := string(cg); ; p = path.Dir(p) {
		out = append(out, host.Cgroup(p))
		if p == "/" || p == "." {
			break
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}
