package agent

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"sync"
	"time"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/policy"
	"github.com/memcgd/memcgd/resolve"
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
	// RecheckInterval is how soon an idle cgroup holding dirty pages over
	// half its background threshold is looked at again.
	RecheckInterval = time.Second
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
	Overrides *Overrides
	// Workers bounds how many cgroups are worked on at once.
	Workers int
	// ActiveInterval is how often an active cgroup is stepped.
	ActiveInterval time.Duration
	// ScanInterval is how often the subtree is listed for new and removed
	// cgroups; AuditInterval how often every idle cgroup is observed, to
	// catch what the watcher cannot see (dirtying of already-cached pages).
	ScanInterval, AuditInterval time.Duration
	// ReclaimStep bounds the bytes reclaimed in one step.
	ReclaimStep uint64
	// Log receives the agent's logs; nil discards them.
	Log *slog.Logger
}

// Agent is memcgd's daemon loop. Create it with New and start it with Run.
type Agent struct {
	opts Options
	log  *slog.Logger

	// work carries cgroups from the loop to the workers; done carries
	// each step's outcome back.
	work chan *cgroupState
	done chan stepResult

	// paused carries the end of each pause back to the loop.
	paused chan pauseResult

	mu      sync.Mutex // guards cfg and cgroups and the fields of each cgroupState marked "mu"
	cfg     *config.Config
	cgroups map[host.Cgroup]*cgroupState
	rescan  chan struct{}
	restep  chan struct{}    // a reload: step every cgroup under the new config
	kick    chan host.Cgroup // a cgroup whose settings changed
	pauses  sync.WaitGroup

	ancMu     sync.Mutex // guards ancestors
	ancestors map[host.Cgroup]observed
}

// pauseResult reports a finished pause.
type pauseResult struct {
	st  *cgroupState
	d   time.Duration
	err error
}

// cgroupState is what the agent keeps per managed cgroup. The loop owns
// the scheduling fields; the worker stepping it owns ctrl; status is
// guarded by Agent.mu.
type cgroupState struct {
	cg   host.Cgroup
	ctrl *policy.Controller

	// loop-owned
	scheduled bool // queued, running, pausing or in the timer heap
	active    bool
	wake      uint64 // the UsageAbove of the current watch

	// worker-owned
	reclaiming bool
	noFreezer  bool // a pause found no freezer for this cgroup: stop trying

	status Status // mu
}

// stepResult is a worker's report to the loop.
type stepResult struct {
	st      *cgroupState
	active  bool
	wake    uint64
	vanish  bool
	resched time.Duration // when active: delay before the next step
	pause   time.Duration // a throttle pause to take before the next step
	recheck time.Duration // when idle: look again after this, watch or not
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
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Agent{
		opts:      o,
		log:       log,
		work:      make(chan *cgroupState),
		done:      make(chan stepResult, o.Workers),
		cfg:       o.Config,
		cgroups:   map[host.Cgroup]*cgroupState{},
		rescan:    make(chan struct{}, 1),
		restep:    make(chan struct{}, 1),
		ancestors: map[host.Cgroup]observed{},
		paused:    make(chan pauseResult, o.Workers),
		kick:      make(chan host.Cgroup, 16),
	}, nil
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
func (a *Agent) Status(cg host.Cgroup) ([]Status, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if cg != "" {
		st, ok := a.cgroups[cg]
		if !ok {
			return nil, fmt.Errorf("cgroup %s is not managed by memcgd", cg)
		}
		return []Status{st.status}, nil
	}
	out := make([]Status, 0, len(a.cgroups))
	for _, st := range a.cgroups {
		out = append(out, st.status)
	}
	sortStatus(out)
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
// before Run returns.
func (a *Agent) Run(ctx context.Context) error {
	var workers sync.WaitGroup
	for range a.opts.Workers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for st := range a.work {
				a.done <- a.step(ctx, st)
			}
		}()
	}
	err := a.loop(ctx)
	close(a.work)
	// Drain results so that workers finishing a step can exit.
	go func() {
		for range a.done {
		}
	}()
	workers.Wait()
	a.pauses.Wait() // pauses in flight thaw their cgroups on ctx.Done
	close(a.done)
	if a.opts.Watcher != nil {
		a.opts.Watcher.Close()
	}
	return err
}

// loop schedules: events, scans and timers decide which cgroups to step;
// the ready queue hands them to the workers in FIFO order, so every
// active cgroup gets its turn.
func (a *Agent) loop(ctx context.Context) error {
	var ready []*cgroupState
	timers := &timerHeap{}
	timer := time.NewTimer(time.Hour)
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
		if st.scheduled {
			return
		}
		st.scheduled = true
		ready = append(ready, st)
	}
	a.scan(ctx, enqueue, true)

	for {
		var work chan *cgroupState
		var next *cgroupState
		if len(ready) > 0 {
			work, next = a.work, ready[0]
		}
		if timers.Len() > 0 {
			timer.Reset(time.Until((*timers)[0].at))
		}
		select {
		case <-ctx.Done():
			return nil
		case work <- next:
			ready = ready[1:]
		case r := <-a.done:
			a.finish(ctx, r, timers)
		case p := <-a.paused:
			a.endPause(p)
			p.st.scheduled = false
			enqueue(p.st)
		case cg := <-a.kick:
			a.mu.Lock()
			st := a.cgroups[cg]
			a.mu.Unlock()
			if st != nil {
				enqueue(st)
			}
		case cg, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			a.mu.Lock()
			st := a.cgroups[cg]
			a.mu.Unlock()
			if st != nil {
				enqueue(st)
			}
		case <-timer.C:
			now := time.Now()
			for timers.Len() > 0 && !(*timers)[0].at.After(now) {
				t := heap.Pop(timers).(timerEntry)
				t.st.scheduled = false
				enqueue(t.st)
			}
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

// finish takes a step's outcome: reschedule an active cgroup, re-arm the
// watch of one gone idle, forget one that vanished.
func (a *Agent) finish(ctx context.Context, r stepResult, timers *timerHeap) {
	st := r.st
	if r.vanish {
		a.forget(st.cg)
		st.scheduled = false
		return
	}
	st.active = r.active
	a.mu.Lock()
	st.status.Active = r.active
	a.mu.Unlock()
	if r.pause > 0 {
		// Pauses run on their own goroutines so that a throttled cgroup
		// holds no worker; the cgroup is stepped again when it ends.
		a.pauses.Add(1)
		go func() {
			defer a.pauses.Done()
			err := a.opts.Host.Pause(ctx, st.cg, r.pause)
			select {
			case a.paused <- pauseResult{st: st, d: r.pause, err: err}:
			case <-ctx.Done():
			}
		}()
		return
	}
	if r.active {
		heap.Push(timers, timerEntry{at: time.Now().Add(r.resched), st: st})
		return
	}
	if r.recheck > 0 {
		heap.Push(timers, timerEntry{at: time.Now().Add(r.recheck), st: st})
	} else {
		st.scheduled = false
	}
	if a.opts.Watcher != nil && r.wake != st.wake {
		if err := a.opts.Watcher.Watch(st.cg, host.Wake{UsageAbove: r.wake}); err != nil {
			a.log.Warn("watch", "cgroup", st.cg, "err", err)
		}
		st.wake = r.wake
	}
}

// endPause accounts a finished pause.
func (a *Agent) endPause(p pauseResult) {
	var c Counters
	switch {
	case p.err == nil:
		c.Pauses, c.Paused = 1, p.d
	case errors.Is(p.err, errors.ErrUnsupported):
		// No freezer reaches this cgroup; write-out and reclaim still
		// work. Say it once.
		p.st.noFreezer = true
		a.log.Warn("cannot throttle: no freezer for this cgroup", "cgroup", p.st.cg, "err", p.err)
	case errors.Is(p.err, host.ErrVanished):
	default:
		c.Errors = 1
		a.log.Warn("pause", "cgroup", p.st.cg, "err", p.err)
	}
	a.addCounters(p.st, c)
}

func (a *Agent) forget(cg host.Cgroup) {
	a.mu.Lock()
	delete(a.cgroups, cg)
	a.mu.Unlock()
	if a.opts.Watcher != nil {
		a.opts.Watcher.Unwatch(cg)
	}
	a.log.Info("cgroup gone", "cgroup", cg)
}

// scan lists the managed subtree: new cgroups are stepped once (which
// decides whether they are managed and arms their watch), removed ones
// are forgotten. With all, every known cgroup is stepped too: the audit.
func (a *Agent) scan(ctx context.Context, enqueue func(*cgroupState), all bool) {
	cgs, err := a.opts.Host.Cgroups(ctx)
	if err != nil {
		a.log.Error("list cgroups", "err", err)
		return
	}
	present := make(map[host.Cgroup]bool, len(cgs))
	var fresh []*cgroupState
	a.mu.Lock()
	for _, cg := range cgs {
		present[cg] = true
		st, ok := a.cgroups[cg]
		if !ok {
			st = &cgroupState{cg: cg, ctrl: policy.NewController(), wake: memcg.NoLimit}
			st.status.Cgroup = cg
			a.cgroups[cg] = st
			fresh = append(fresh, st)
		} else if all {
			fresh = append(fresh, st)
		}
	}
	var gone []host.Cgroup
	for cg := range a.cgroups {
		if !present[cg] {
			gone = append(gone, cg)
		}
	}
	a.mu.Unlock()
	for _, cg := range gone {
		a.forget(cg)
	}
	for _, st := range fresh {
		enqueue(st)
	}
}

// step observes one cgroup, asks its controller and acts.
func (a *Agent) step(ctx context.Context, st *cgroupState) stepResult {
	h := a.opts.Host
	chain, knobs, err := a.ancestry(ctx, st.cg)
	if err != nil {
		if errors.Is(err, host.ErrVanished) {
			return stepResult{st: st, vanish: true}
		}
		a.log.Warn("observe", "cgroup", st.cg, "err", err)
		return stepResult{st: st, active: true, resched: a.opts.ScanInterval}
	}
	s := chain[len(chain)-1]
	eff := memcg.Resolve(chain, knobs)
	a.mu.Lock()
	managed := a.managed(chain)
	st.status.Managed = managed
	a.mu.Unlock()
	if !managed {
		a.setStatus(st, s, eff, h.Now())
		return stepResult{st: st, wake: memcg.NoLimit}
	}
	if dc, ok := h.(host.DirtyCounter); ok {
		// Only for managed cgroups: it reads every task's /proc/PID/io.
		switch n, err := dc.Dirtied(ctx, st.cg); {
		case err == nil:
			s.Counters.HasDirtied, s.Counters.DirtiedBytes = true, n
		case errors.Is(err, host.ErrVanished):
			return stepResult{st: st, vanish: true}
		default:
			a.log.Debug("count dirtied bytes", "cgroup", st.cg, "err", err)
		}
	}
	d := st.ctrl.Step(policy.Input{
		Now: h.Now(), Stat: s, Dirty: eff.Dirty, Watermarks: eff.Watermarks,
		WritebackFirst: eff.Knobs.WritebackFirst, Lead: a.opts.ActiveInterval,
	})
	var c Counters
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
	vanished := false
	switch {
	case d.Flush:
		err := h.Flush(ctx, st.cg)
		c.Flushes++
		c.FlushBytes += s.Dirty
		vanished = fail("flush", err)
	case d.WriteOut:
		w, err := h.WriteOut(ctx, st.cg)
		if w.Files > 0 {
			// Only write-outs that found files count: the dirty pages
			// of files no task holds open are out of its reach.
			c.WriteOuts++
			c.WriteOutBytes += w.Bytes
		}
		vanished = fail("write out", err)
	}
	if d.Reclaim > 0 && !vanished {
		if !st.reclaiming {
			c.ReclaimRuns++
		}
		got, err := h.Reclaim(ctx, st.cg, min(d.Reclaim, a.opts.ReclaimStep))
		c.ReclaimedBytes += got
		if !errors.Is(err, host.ErrNothingReclaimed) {
			vanished = vanished || fail("reclaim", err)
		}
	}
	st.reclaiming = d.Reclaim > 0
	if vanished {
		return stepResult{st: st, vanish: true}
	}
	a.setStatus(st, s, eff, h.Now())
	a.addCounters(st, c)
	r := stepResult{st: st, wake: wakeAt(s, eff), resched: a.opts.ActiveInterval}
	dirty := s.DirtyAndWriteback()
	r.active = !d.Idle() || dirty > 0 && dirty >= eff.Dirty.Background
	if !r.active && eff.Dirty.Background != memcg.NoLimit && s.Dirty > eff.Dirty.Background/2 {
		// Rewriting cached pages dirties them without charging new
		// ones, which no watch sees: look again soon while the cgroup
		// holds dirty pages near its threshold.
		r.recheck = RecheckInterval
	}
	if d.Pause > 0 && !st.noFreezer {
		r.pause = d.Pause
	}
	return r
}

func (a *Agent) setStatus(st *cgroupState, s memcg.Stat, eff memcg.Effective, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st.status.Stat, st.status.Effective, st.status.Observed = s, eff, now
}

// addCounters adds c to the cgroup's counters.
func (a *Agent) addCounters(st *cgroupState, c Counters) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := &st.status.Counters
	t.ReclaimedBytes += c.ReclaimedBytes
	t.ReclaimRuns += c.ReclaimRuns
	t.WriteOuts += c.WriteOuts
	t.WriteOutBytes += c.WriteOutBytes
	t.Flushes += c.Flushes
	t.FlushBytes += c.FlushBytes
	t.Pauses += c.Pauses
	t.Paused += c.Paused
	t.Errors += c.Errors
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
func (a *Agent) ancestry(ctx context.Context, cg host.Cgroup) ([]memcg.Stat, []memcg.Knobs, error) {
	paths := Ancestors(cg)
	chain := make([]memcg.Stat, len(paths))
	knobs := make([]memcg.Knobs, len(paths))
	now := a.opts.Host.Now()
	for i, p := range paths {
		self := i == len(paths)-1
		s, ok := a.cachedAncestor(p, now)
		if self || !ok {
			var err error
			if s, err = a.opts.Host.Observe(ctx, p); err != nil {
				return nil, nil, err
			}
			if !self {
				a.ancMu.Lock()
				a.ancestors[p] = observed{s, now}
				a.ancMu.Unlock()
			}
		}
		chain[i], knobs[i] = s, a.Knobs(p)
	}
	return chain, knobs, nil
}

// observed is an ancestor's reading and when it was taken.
type observed struct {
	stat memcg.Stat
	at   time.Time
}

func (a *Agent) cachedAncestor(p host.Cgroup, now time.Time) (memcg.Stat, bool) {
	a.ancMu.Lock()
	defer a.ancMu.Unlock()
	o, ok := a.ancestors[p]
	if !ok || now.Sub(o.at) >= a.opts.ActiveInterval {
		delete(a.ancestors, p)
		return memcg.Stat{}, false
	}
	return o.stat, true
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

// wakeAt is the usage at which an idle cgroup must be looked at again: it
// cannot reach its dirty background threshold before charging that many
// new pages (dirtying cached pages is left to the audit), nor its low
// watermark.
func wakeAt(s memcg.Stat, e memcg.Effective) uint64 {
	wake := memcg.NoLimit
	if bg := e.Dirty.Background; bg != memcg.NoLimit && bg > s.Dirty && s.Usage <= memcg.NoLimit-(bg-s.Dirty) {
		wake = s.Usage + (bg - s.Dirty)
	}
	if w := e.Watermarks; w.Enabled() && s.Limit != memcg.NoLimit && s.Limit > w.Low {
		wake = min(wake, s.Limit-w.Low)
	}
	return wake
}
