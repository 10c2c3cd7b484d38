package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/overrides"
	"github.com/memcgd/memcgd/sched"
	"github.com/memcgd/memcgd/state"
)

// Defaults of Options.
const (
	DefaultWorkers        = sched.DefaultWorkers
	DefaultActiveInterval = sched.DefaultActiveInterval
	DefaultScanInterval   = sched.DefaultScanInterval
	DefaultAuditInterval  = sched.DefaultAuditInterval
	DefaultReaction       = sched.DefaultReaction
	// DefaultStopTimeout bounds how long Run waits at shutdown for the
	// host calls in flight. A reclaim step is one bounded write and the
	// episodes end at once, so this is only reached by a call stuck in
	// the kernel; the caller's undo must not wait for it.
	DefaultStopTimeout = time.Second
)

// Options configure an Agent.
type Options struct {
	// Host is the kernel.
	Host host.Host
	// Watcher wakes the agent on cgroup events; nil means the agent only
	// finds cgroups in need by its scans.
	Watcher host.Watcher
	// Config is the policy to start with.
	Config *config.Config
	// Overrides are runtime knob settings; nil means none.
	Overrides *overrides.Overrides
	// Self are the daemon's own cgroups, one path per hierarchy it is in
	// (memory, unified, v1 freezer), as in /proc/self/cgroup: never
	// throttled nor reclaimed (policy.Exempt).
	Self []host.Cgroup
	// Workers, ActiveInterval, ScanInterval, AuditInterval, Reaction and
	// ReclaimStep are the scheduler's (sched.Config); zero: its defaults.
	Workers                                               int
	ActiveInterval, ScanInterval, AuditInterval, Reaction time.Duration
	ReclaimStep                                           uint64
	// NoPace keeps the freezer as the throttle where the host could pace
	// (--pace=off); PacePeriodCap is the longest period of a pace
	// (policy.Input.PacePeriodCap); PacedReportGap holds back the reports
	// of a paced cgroup (sched.Config.PacedReportGap).
	NoPace                        bool
	PacePeriodCap, PacedReportGap time.Duration
	// DryRun observes and decides but changes nothing (sched.Config.DryRun).
	DryRun bool
	// StopTimeout bounds how long Run waits, once its context is done,
	// for the host calls in flight (DefaultStopTimeout if zero).
	StopTimeout time.Duration
	// Log receives the agent's logs; nil discards them.
	Log *slog.Logger
}

// Agent is memcgd's daemon: the executor of a sched.Core on the real
// kernel. Create it with New and start it with Run. The package
// documentation says which goroutine owns what.
type Agent struct {
	opts Options      // read-only after New
	log  *slog.Logger // read-only after New
	// tracker and tracking: the dirty-tracking path in force and why not
	// the tracker; read-only after New.
	tracker  bool
	tracking string
	// levels says the watcher reports dirty+writeback levels
	// (host.DirtyPath.Levels); read-only after New.
	levels bool

	// requests carry work for the loop from other goroutines (a reload,
	// a kick); done is closed when Run returns, so that no sender waits
	// on a loop that has stopped.
	requests chan func(*sched.Core, time.Time)
	done     chan struct{}
	ready    atomic.Bool // the first listing's cgroups each stepped once

	// calls is the workers' CPU time by kind of op; late the loop's
	// lateness for its timers.
	calls callCPU
	late  lateness

	mu     sync.Mutex // guards cfg and status
	cfg    *config.Config
	status map[host.Cgroup]*state.Status // the Core's statuses, as of its last Ready; never changed (sched.Ready)
}

// New returns an agent; it does nothing until Run.
func New(o Options) (*Agent, error) {
	if o.Host == nil || o.Config == nil {
		return nil, errors.New("agent: Host and Config are required")
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = DefaultStopTimeout
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Agent{opts: o, log: log, cfg: o.Config, status: map[host.Cgroup]*state.Status{},
		requests: make(chan func(*sched.Core, time.Time), 64), done: make(chan struct{})}
	a.tracker, a.tracking = trackerInForce(o.Host)
	if fp, ok := o.Host.(host.FastPath); ok {
		a.levels = a.tracker && fp.DirtyPath().Levels
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
	switch {
	case p.Tracker:
		return true, ""
	case p.Reason == "":
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

// Ready reports whether the daemon is ready: every cgroup of its first
// listing has been stepped once, on the dirty-tracking path chosen at
// start. Until then it returns why not.
func (a *Agent) Ready() error {
	if !a.ready.Load() {
		return errors.New("the first scan of the managed cgroups is not done")
	}
	return nil
}

// Reload replaces the running policy: every cgroup, idle ones too, takes
// the new thresholds at once.
func (a *Agent) Reload(c *config.Config) {
	a.mu.Lock()
	a.cfg = c
	a.mu.Unlock()
	a.request(func(core *sched.Core, now time.Time) { core.Reload(now, c) })
}

// request hands f to the loop, unless Run has returned.
func (a *Agent) request(f func(*sched.Core, time.Time)) {
	select {
	case a.requests <- f:
	case <-a.done:
	}
}

// Status returns the daemon's view of cg, or of every managed cgroup when
// cg is "".
func (a *Agent) Status(cg host.Cgroup) ([]state.Status, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if cg != "" {
		st, ok := a.status[cg]
		if !ok {
			return nil, fmt.Errorf("cgroup %s is not managed by memcgd: %s", cg, a.outsideLocked(cg))
		}
		return []state.Status{*st}, nil
	}
	out := make([]state.Status, 0, len(a.status))
	for _, st := range a.status {
		out = append(out, *st)
	}
	state.Sort(out)
	return out, nil
}

// outsideLocked says why a cgroup the daemon has no status of is not
// managed. Caller holds a.mu.
func (a *Agent) outsideLocked(cg host.Cgroup) string {
	if !under(cg, a.cfg.Under) {
		return fmt.Sprintf("it is outside manage.under (%s)", a.cfg.Under)
	}
	return "the daemon has not found it (it may not exist, or not yet)"
}

// under reports whether cg is root or below it.
func under(cg, root host.Cgroup) bool {
	return slices.Contains(host.Ancestors(cg), root)
}

// Run runs the daemon until ctx is done. Every throttle episode is ended
// before Run returns, unless a host call is stuck in the kernel: Run waits
// at most StopTimeout for the calls in flight, then logs those still
// running and returns, so that the caller's undo always runs.
func (a *Agent) Run(ctx context.Context) error {
	defer close(a.done)
	if a.opts.Watcher != nil {
		defer a.opts.Watcher.Close()
	}
	_, freezer := a.opts.Host.(host.Freezer)
	_, pacer := a.opts.Host.(host.Pacer)
	pacer = pacer && !a.opts.NoPace
	_, counter := a.opts.Host.(host.DirtyCounter)
	level := slog.LevelInfo
	if a.log.Enabled(ctx, slog.LevelDebug) {
		level = slog.LevelDebug
	}
	a.mu.Lock()
	cfg := a.cfg
	a.mu.Unlock()
	core := sched.New(sched.Config{
		Policy: cfg, Overrides: a.opts.Overrides, Self: a.opts.Self,
		Tracker: a.tracker, TrackingReason: a.tracking, Levels: a.levels, Freezer: freezer, Pacer: pacer, Counter: counter,
		Workers: a.opts.Workers, ActiveInterval: a.opts.ActiveInterval, Reaction: a.opts.Reaction,
		ScanInterval: a.opts.ScanInterval, AuditInterval: a.opts.AuditInterval, ReclaimStep: a.opts.ReclaimStep,
		PacePeriodCap: a.opts.PacePeriodCap, PacedReportGap: a.opts.PacedReportGap,
		DryRun: a.opts.DryRun,
		Log:    level,
	}, time.Now())
	x := newExecutor(a, core)
	x.start(ctx)
	defer x.close()

	// Subscribe to new and removed cgroups before the first listing is
	// taken, so that none created in between is missed until the next
	// scan.
	var born <-chan host.CgroupEvent
	if n, ok := a.opts.Host.(host.CgroupNotifier); ok {
		ch, err := n.CgroupEvents(ctx)
		if err != nil {
			a.log.Warn("no reports of new cgroups: they wait for the periodic scan", "err", err)
		} else {
			born = ch
		}
	}
	var events <-chan host.Cgroup
	if a.opts.Watcher != nil {
		events = a.opts.Watcher.Events()
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		x.ready(ctx, timer)
		select {
		case <-ctx.Done():
			return x.stop(ctx)
		case r := <-x.results:
			x.advance(r)
		case cg, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			core.Report(time.Now(), cg)
		case ev, ok := <-born:
			switch {
			case !ok:
				born = nil
			case ev.Rescan:
				core.Rescan(time.Now())
			case ev.Removed:
				core.CgroupRemoved(time.Now(), ev.Cgroup)
			default:
				core.CgroupCreated(time.Now(), ev.Cgroup)
			}
		case f := <-a.requests:
			f(core, time.Now())
		case <-timer.C:
			now := time.Now()
			a.late.observe(now.Sub(x.deadline))
			core.Tick(now)
		}
	}
}
