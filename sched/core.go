package sched

import (
	"cmp"
	"log/slog"
	"slices"
	"time"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/policy"
	"github.com/memcgd/memcgd/resolve"
	"github.com/memcgd/memcgd/state"
)

// Defaults of Config.
const (
	DefaultWorkers        = 2
	DefaultActiveInterval = policy.DefaultActiveInterval
	DefaultScanInterval   = 30 * time.Second
	DefaultAuditInterval  = 5 * time.Minute
	// DefaultReaction is the daemon's reaction delay as the policy
	// anticipates it (policy.Input.Reaction): from a wake-up or a
	// deadline to the step it triggers. A step reads a few cgroupfs
	// files; a millisecond covers it on an idle node.
	DefaultReaction = time.Millisecond
	// StaleAncestor is the oldest an ancestor's reading may be and still
	// be used by a step; from ActiveInterval on, a newer one is read off
	// the steps (Refresh). An ancestor's reading only scales ratio limits
	// by its page cache (memcg.EffectiveDirtyLimits), which a second does
	// not change much, while a read of a high ancestor's memory.stat (the
	// root's sums the whole hierarchy) can take tens of milliseconds, on
	// the step of a throttled writer.
	StaleAncestor = time.Second
)

// HoldsMemcgd is the Status.Exempt of a cgroup whose subtree holds the
// daemon itself (policy.Exempt).
const HoldsMemcgd = "not throttled: holds memcgd"

// Overrides are the runtime knob settings (package overrides), read when
// a step resolves a cgroup's knobs.
type Overrides = resolve.Overrides

// Config configures a Core.
type Config struct {
	// Policy is the config to start with (Reload replaces it).
	Policy *config.Config
	// Overrides are the runtime settings; nil means none.
	Overrides Overrides
	// Self are the daemon's own cgroups, one path per hierarchy it is in
	// (policy.Exempt).
	Self []host.Cgroup
	// Tracker says the host's dirty tracker is in force (host.DirtyPath),
	// and TrackingReason why not when it is not.
	Tracker        bool
	TrackingReason string
	// Levels says the watcher reports dirty+writeback levels
	// (host.DirtyPath.Levels, policy.Input.LevelWakes).
	Levels bool
	// Freezer says the host can hold a freeze (host.Freezer); Pacer that
	// it can pace a cgroup's dirtying tasks (host.Pacer); Counter that it
	// counts dirtied bytes (host.DirtyCounter).
	Freezer, Pacer, Counter bool
	// Workers bounds the steps, and the actions, in flight at once
	// (DefaultWorkers if zero).
	Workers int
	// ActiveInterval is the ceiling of an active cgroup's NextLook
	// (policy.Input.ActiveInterval); Reaction the reaction delay the
	// policy anticipates; ScanInterval and AuditInterval how often the
	// subtree is listed, and every cgroup stepped. Zero: the defaults.
	ActiveInterval, Reaction, ScanInterval, AuditInterval time.Duration
	// ReclaimStep bounds the bytes one decision reclaims
	// (policy.DefaultReclaimStep if zero).
	ReclaimStep uint64
	// PacePeriodCap is the longest CFS period of a pace
	// (policy.Input.PacePeriodCap).
	PacePeriodCap time.Duration
	// PacedReportGap, where positive, is the least time from a step of a
	// cgroup whose pace limits its tasks to the next that a watcher's
	// report may ask for; its decision's own looks are not held back.
	// The kernel holds the pace between looks. With the tracker a writer
	// dirtying gigabytes a second passes its thresholds faster than the
	// daemon can look, and the steps then take as much CPU as the daemon
	// gets; a gap trades the level's hold for that CPU
	// (docs/throttle.md, "How often a paced cgroup is looked at"). 0:
	// every report is taken at once.
	PacedReportGap time.Duration
	// Log is the least level of the records Ready hands out; nil is info.
	Log slog.Leveler
	// DryRun: observe and decide, but hand out no op that changes
	// anything (Kind.Changes); each is taken as done (dryrun.go).
	DryRun bool
}

// Core is the scheduler. Create it with New; see the package
// documentation for the contract.
type Core struct {
	cfg    Config
	policy *config.Config

	cgroups map[host.Cgroup]*cgroup // every known cgroup of the subtree
	// pacing are the cgroups with a pacing episode open.
	pacing map[host.Cgroup]bool
	order  []*cgroup // the same, in the order first listed or created

	// queue holds the cgroups waiting for a step, in the order they get
	// one: throttled cgroups are put at the front.
	queue []*cgroup

	timers   timers
	timerSeq uint64

	// lanes are the ops waiting for a lane, per lane, and how many are in
	// flight; observing how many of the fast lane's are steps.
	lanes     [LaneCount][]Op
	inflight  [LaneCount]int
	observing int
	pending   pendingOps // the ops in flight
	nextID    uint64
	out       []Op // the ops dispatched, while Ready runs
	// handed are the slices the last Ready handed out, which the next
	// one reuses (Ready).
	handed struct {
		ops    []Op
		status []*state.Status
	}

	// spare holds the arrays of finished steps, for the next ones.
	spare stepArrays

	// ancestors are readings of ancestors the steps reuse (ancestors.go).
	ancestors map[host.Cgroup]reading

	// listing says a List op is in flight; relist that another is due
	// when it returns, and relistAll that it is an audit.
	listing, relist, relistAll bool
	// scanned says the first listing's cgroups have each been stepped
	// once (Ready.Scanned).
	scanned   bool
	unscanned int
	// flushing says a full flush is in flight: one on the host at a time.
	flushing bool
	stopping bool

	stats Stats
	// dry are the results of the dry run's ops, taken at the next Ready.
	dry []Result

	changed []*cgroup // statuses changed since the last Ready
	removed []host.Cgroup
	logs    []slog.Record
	now     time.Time
}

// pendingOp is what Advance needs to take an op's result.
type pendingOp struct {
	op Op
	cg *cgroup
	// cached are the readings of the ancestors an Observe did not read,
	// root first, with a zero Stat at each position Read fills.
	cached []memcg.Stat
	// fromCache marks the positions taken from cached.
	fromCache []bool
	// stat is the observation an action was decided on.
	stat memcg.Stat
	// all, for List: it was an audit.
	all bool
	// dry says the op was not handed out: a dry run's (dryrun.go).
	dry bool
}

// Stats count what the Core did, for the simulator's reports and tests.
type Stats struct {
	// Steps counts the steps (Observe results taken).
	Steps int64
	// DriverFreezes and DriverThaws count the freezer ops of the
	// throttle's own deadlines (RunFor, HoldFor passing with no newer
	// decision).
	DriverFreezes, DriverThaws int64
}

// New returns a Core that begins, at now, with the first listing of the
// subtree.
func New(cfg Config, now time.Time) *Core {
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.ActiveInterval <= 0 {
		cfg.ActiveInterval = DefaultActiveInterval
	}
	if cfg.Reaction <= 0 {
		cfg.Reaction = DefaultReaction
	}
	if cfg.ScanInterval <= 0 {
		cfg.ScanInterval = DefaultScanInterval
	}
	if cfg.AuditInterval <= 0 {
		cfg.AuditInterval = DefaultAuditInterval
	}
	if cfg.ReclaimStep == 0 {
		cfg.ReclaimStep = policy.DefaultReclaimStep
	}
	if cfg.Log == nil {
		cfg.Log = slog.LevelInfo
	}
	c := &Core{
		cfg: cfg, policy: cfg.Policy, now: now,
		cgroups:   map[host.Cgroup]*cgroup{},
		pacing:    map[host.Cgroup]bool{},
		ancestors: map[host.Cgroup]reading{},
	}
	if cfg.Tracker {
		c.log(slog.LevelInfo, "dirty tracking", "path", state.TrackingTracker)
	} else {
		c.log(slog.LevelInfo, "dirty tracking", "path", state.TrackingPoll, "reason", cfg.TrackingReason)
	}
	c.at(timer{at: now.Add(cfg.ScanInterval), kind: timerScan})
	c.at(timer{at: now.Add(cfg.AuditInterval), kind: timerAudit})
	c.list(true)
	return c
}

// Stats returns what the Core did so far.
func (c *Core) Stats() Stats { return c.stats }

// Capacity is how many ops of lane l the Core has in flight at most.
func (c *Core) Capacity(l Lane) int {
	switch l {
	case Fast:
		// One more than the steps may take: a freezer op never waits
		// for a step of another cgroup to finish.
		return c.cfg.Workers + 1
	case Slow:
		return c.cfg.Workers
	}
	return 1
}

// Ready is what the driver must do now, and when to come back.
type Ready struct {
	// Ops are the ops to carry out, in order per lane. Ops and Status
	// are valid until the next Ready, which reuses their arrays.
	Ops []Op
	// Deadline is when to call Tick next, if nothing happens before;
	// zero when no timer is set.
	Deadline time.Time
	// Status holds the statuses changed since the last Ready, Removed the
	// cgroups no longer known. The Core never changes a status once
	// handed out, nor may the driver: it may keep them to read at any
	// time, from any goroutine.
	Status  []*state.Status
	Removed []host.Cgroup
	// Logs are the records to log.
	Logs []slog.Record
	// Scanned says every cgroup of the first listing has been stepped:
	// the daemon is ready.
	Scanned bool
	// Stopped says, after Stop, that no episode is open and no freezer op
	// is in flight: the driver may return.
	Stopped bool
}

// Ready hands out the ops due now and what changed, and empties both.
func (c *Core) Ready() Ready {
	for len(c.dry) > 0 {
		rs := c.dry
		c.dry = nil
		c.Advance(c.now, rs...)
	}
	c.out = reuse(c.handed.ops)
	c.dispatch()
	r := Ready{Ops: c.out, Deadline: c.deadline(), Removed: c.removed, Logs: c.logs, Scanned: c.scanned,
		Status: reuse(c.handed.status)}
	c.handed.ops, c.out, c.removed, c.logs = c.out, nil, nil, nil
	for _, cg := range c.changed {
		cg.changed = false
		if !cg.gone {
			r.Status = append(r.Status, cg.status)
			cg.shared = true
		}
	}
	c.handed.status = r.Status
	c.changed = c.changed[:0]
	if c.stopping {
		r.Stopped = c.stopped()
		r.Deadline = time.Time{}
	}
	return r
}

// HasReady reports whether Ready has anything to hand out.
func (c *Core) HasReady() bool {
	if len(c.out) > 0 || len(c.changed) > 0 || len(c.removed) > 0 || len(c.logs) > 0 || len(c.dry) > 0 {
		return true
	}
	for l := range LaneCount {
		if len(c.lanes[l]) > 0 && c.inflight[l] < c.Capacity(l) {
			return true
		}
	}
	return len(c.queue) > 0 && c.observing < c.cfg.Workers && !c.stopping
}

// Tick tells the Core the time is now; the timers due fire.
func (c *Core) Tick(now time.Time) {
	c.now = now
	if c.stopping {
		return
	}
	for _, t := range c.due(now) {
		switch t.kind {
		case timerLook:
			t.cg.timed = false
			c.enqueue(t.cg)
		case timerBorn:
			c.wake(t.cg, false)
		case timerHold:
			c.holdPassed(t.cg, t.runAfter)
		case timerRun:
			c.runPassed(t.cg)
		case timerScan:
			c.at(timer{at: now.Add(c.cfg.ScanInterval), kind: timerScan})
			c.list(false)
		case timerAudit:
			c.at(timer{at: now.Add(c.cfg.AuditInterval), kind: timerAudit})
			c.list(true)
		}
	}
}

// Report is the watcher reporting cg (host.Watcher.Events). Without the
// tracker a report of an active cgroup is but a hint (a usage watch, a
// PSI event): its NextLook, derived from its dirtying rate, already
// bounds what it dirties unseen. With the tracker every report is a
// threshold the last decision armed for this very moment, or, for a
// cgroup the userspace kswapd works for, reclaim against its limit, the
// kswapd's cue to run again (policy.Wake.OnlyArmed), and NextLook is no
// bound at all; with Config.PacedReportGap, a report of a cgroup whose
// pace limits its tasks waits for the gap's end after its last step.
func (c *Core) Report(now time.Time, cg host.Cgroup) {
	c.now = now
	if st := c.cgroups[cg]; st != nil {
		if hint := !c.cfg.Tracker; hint || !c.holdReport(st) {
			c.wake(st, hint)
		}
	}
}

// Kick steps cg soon: its settings changed (a runtime override).
func (c *Core) Kick(now time.Time, cg host.Cgroup) {
	c.now = now
	if st := c.cgroups[cg]; st != nil {
		c.wake(st, false)
	} else {
		c.list(false)
	}
}

// CgroupCreated is the host reporting cg created in the subtree
// (host.CgroupNotifier): it is stepped at once, within milliseconds of
// its mkdir, and again at policy.BornRelooks.
func (c *Core) CgroupCreated(now time.Time, cg host.Cgroup) {
	c.now = now
	if c.stopping || c.cgroups[cg] != nil {
		return
	}
	st := c.add(cg)
	c.enqueue(st)
	for _, d := range policy.BornRelooks {
		c.at(timer{at: now.Add(d), kind: timerBorn, cg: st})
	}
}

// CgroupRemoved is the host reporting cg removed.
func (c *Core) CgroupRemoved(now time.Time, cg host.Cgroup) {
	c.now = now
	if st := c.cgroups[cg]; st != nil {
		c.forget(st)
	}
}

// Rescan is the host reporting lost cgroup events: list the subtree.
func (c *Core) Rescan(now time.Time) {
	c.now = now
	c.list(false)
}

// Reload replaces the running config: every cgroup, idle ones too, takes
// the new thresholds now and re-arms its watch on them.
func (c *Core) Reload(now time.Time, p *config.Config) {
	c.now = now
	c.policy = p
	c.list(true)
}

// Stop ends the Core's work: no step or action is started any more, and
// every open throttle episode is ended (its cgroup thawed). The driver
// carries out the End ops Ready hands out and reports them until Ready
// says Stopped.
func (c *Core) Stop(now time.Time) {
	c.now = now
	if c.stopping {
		return
	}
	c.stopping = true
	for _, st := range c.queue {
		st.queued = false
	}
	c.queue = nil
	for l := range LaneCount {
		kept := c.lanes[l][:0]
		for _, op := range c.lanes[l] {
			switch op.Kind {
			case Freeze, Thaw, Refreeze, End, Pace, SetPace, Unpace:
				kept = append(kept, op)
			default:
				c.pending.take(op.ID) // never handed out
			}
		}
		c.lanes[l] = kept
	}
	for _, st := range c.order {
		c.endPace(st, "stopping")
		c.endEpisode(st, "stopping")
	}
}

// stopped reports whether nothing of the throttle is left to undo.
func (c *Core) stopped() bool {
	for _, st := range c.order {
		if st.thr.isOpen() || st.thr.isBusy() || st.pace.isOpen() || st.pace.isBusy() {
			return false
		}
	}
	return true
}

// Status returns the Core's view of every known cgroup, by path.
func (c *Core) Status() []state.Status {
	out := make([]state.Status, 0, len(c.order))
	for _, st := range c.order {
		out = append(out, *st.status)
	}
	slices.SortFunc(out, func(a, b state.Status) int { return cmp.Compare(a.Cgroup, b.Cgroup) })
	return out
}

// dispatch starts the steps of queued cgroups, as many as Workers allows,
// then moves ops from the lanes to out as far as their capacity allows.
func (c *Core) dispatch() {
	// A queue or lane emptied starts again at the front of its array,
	// which the next appends reuse.
	queue := c.queue
	for len(c.queue) > 0 && c.observing < c.cfg.Workers && !c.stopping {
		st := c.queue[0]
		c.queue = c.queue[1:]
		st.queued = false
		if !st.gone {
			c.startStep(st)
		}
	}
	if len(c.queue) == 0 {
		c.queue = reuse(queue)
	}
	for l := range LaneCount {
		lane := c.lanes[l]
		for len(c.lanes[l]) > 0 && c.inflight[l] < c.Capacity(l) {
			op := c.lanes[l][0]
			c.lanes[l] = c.lanes[l][1:]
			c.inflight[l]++
			c.out = append(c.out, op)
		}
		if len(c.lanes[l]) == 0 {
			c.lanes[l] = reuse(lane)
		}
	}
}

// reuse returns s emptied, to be appended to again: its array, its
// elements cleared (those past len(s) were cleared before), or none when
// it is larger than a busy cgroup's steps need (a first scan queues
// thousands), so that it does not stay in the heap.
func reuse[S ~[]E, E any](s S) S {
	if cap(s) > reusedCap {
		return nil
	}
	clear(s)
	return s[:0]
}

// reusedCap is the largest array reuse keeps.
const reusedCap = 256

// emit queues op on its lane, recording what its result needs.
func (c *Core) emit(op Op, p pendingOp) {
	c.nextID++
	op.ID = c.nextID
	p.op = op
	if c.cfg.DryRun && op.Kind.Changes() {
		p.dry = true
		c.pending.put(p)
		c.dry = append(c.dry, c.dryRun(op))
		return
	}
	c.pending.put(p)
	l := op.Kind.Lane()
	c.lanes[l] = append(c.lanes[l], op)
}

// emitFirst queues op ahead of its lane's waiting ops: a freezer op is
// due before any read.
func (c *Core) emitFirst(op Op, p pendingOp) {
	c.emit(op, p)
	if c.pending.get(c.nextID).dry {
		return
	}
	l := op.Kind.Lane()
	q := c.lanes[l]
	copy(q[1:], q[:len(q)-1])
	q[0] = c.pending.get(c.nextID).op
}

// Advance takes the results of ops Ready handed out, at now.
func (c *Core) Advance(now time.Time, results ...Result) {
	c.now = now
	for _, r := range results {
		p, ok := c.pending.take(r.Op.ID)
		if !ok {
			continue // not ours, or reported twice
		}
		l := p.op.Kind.Lane()
		if !p.dry {
			c.inflight[l]--
		}
		if r.Took >= SlowCall {
			c.log(slog.LevelDebug, "slow host call", "cgroup", p.op.Cgroup, "call", p.op.Kind.String(), "took", r.Took)
		}
		switch p.op.Kind {
		case List:
			c.listed(p, r)
		case Observe:
			c.observing--
			c.stats.Steps++
			c.observed(p, r)
		case Refresh:
			c.refreshed(p, r)
		case Freeze, Thaw, Refreeze, End:
			c.throttled(p, r)
		case Pace, SetPace, Unpace:
			c.paced(p, r)
		case WriteOut, Flush, Reclaim:
			c.acted(p, r)
		case Watch:
			if r.Err != nil && !isVanished(r.Err) {
				c.log(slog.LevelWarn, "watch", "cgroup", p.op.Cgroup, "err", r.Err)
			}
		case Forget:
			if r.Err != nil {
				c.log(slog.LevelWarn, "forget", "cgroup", p.op.Cgroup, "err", r.Err)
			}
		}
	}
}

// SlowCall is how long a host call may take before the Core logs it at
// debug level: a step's calls are due within the throttle's millisecond,
// and one that holds a worker for tens of ms lets a writer run unseen.
const SlowCall = 5 * time.Millisecond

// list asks for a listing of the subtree; all also steps every known
// cgroup (an audit, a reload).
func (c *Core) list(all bool) {
	if c.stopping {
		return
	}
	if c.listing {
		c.relist, c.relistAll = true, c.relistAll || all
		return
	}
	c.listing = true
	c.emit(Op{Kind: List}, pendingOp{all: all})
}

// listed takes a listing: new cgroups are stepped (which decides whether
// they are managed and arms their watch), removed ones forgotten, and
// with all every known cgroup is stepped too. It also drops the ancestor
// readings too old to be used again.
func (c *Core) listed(p pendingOp, r Result) {
	c.listing = false
	defer func() {
		if c.relist {
			all := c.relistAll
			c.relist, c.relistAll = false, false
			c.list(all)
		}
	}()
	if c.stopping {
		return
	}
	c.sweepAncestors()
	if r.Err != nil {
		c.log(slog.LevelError, "list cgroups", "err", r.Err)
		return
	}
	present := make(map[host.Cgroup]bool, len(r.Cgroups))
	first := !c.scanned && c.unscanned == 0
	for _, cg := range r.Cgroups {
		present[cg] = true
		st, ok := c.cgroups[cg]
		if !ok {
			st = c.add(cg)
		} else if !p.all {
			continue
		}
		if first {
			st.firstScan = true
			c.unscanned++
		}
		c.enqueue(st)
	}
	for _, st := range slices.Clone(c.order) {
		if !present[st.cg] {
			c.forget(st)
		}
	}
	if first && c.unscanned == 0 {
		c.scanned = true
	}
}

// log records a log line at level, if it is enabled.
func (c *Core) log(level slog.Level, msg string, args ...any) {
	if level < c.cfg.Log.Level() {
		return
	}
	rec := slog.NewRecord(c.now, level, msg, 0)
	rec.Add(args...)
	if c.cfg.DryRun && level >= slog.LevelInfo {
		rec.Add("dry_run", true)
	}
	c.logs = append(c.logs, rec)
}
