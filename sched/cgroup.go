package sched

import (
	"errors"
	"log/slog"
	"time"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/policy"
	"github.com/memcgd/memcgd/resolve"
	"github.com/memcgd/memcgd/state"
)

// cgroup is what the Core keeps of one cgroup of the subtree, from the
// listing or the report that finds it until it is forgotten. A cgroup
// removed and created again at the same path gets a new one; results
// that come back for the old one are dropped (gone).
type cgroup struct {
	cg     host.Cgroup
	exempt bool // it holds the daemon (policy.Exempt)
	// unavailable is why no freezer reaches it (the host said so): it is
	// never frozen again.
	unavailable string
	ctrl        *policy.Controller
	gone        bool
	// managed is the last step's verdict; known says there was one.
	managed, known bool

	// The schedule: queued in Core.queue; stepping while its Observe is
	// in flight, again when it was woken meanwhile; timed while its next
	// look is on the heap, at lookAt and lookGen (older entries are
	// stale); stepAt is when its last step began, and held says a report
	// came within Config.PacedReportGap of it.
	queued, stepping, again, timed, held bool
	lookGen                              uint64
	lookAt, stepAt                       time.Time
	// active and throttled are the last decision's Active and Episode.
	active, throttled bool
	// writing says a write-out or flush of its is in flight, reclaiming
	// a reclaim: a step that finds one so skips its own of that kind (a
	// write-out in flight is one already started, and reclaim comes again
	// at the next step). The two kinds do not wait for each other: a
	// write-out that waits for a full device queue does not hold up
	// reclaim of clean pages.
	writing, reclaiming bool
	// wake is the watch armed, or being armed.
	wake host.Wake
	// firstScan says it was found by the first listing and not stepped
	// yet (Ready.Scanned).
	firstScan bool

	// thr and pace are the throttle's state, from the first decision
	// that freezes or paces the cgroup on (nil before): most cgroups of
	// a host are never throttled.
	thr  *throttle
	pace *pace

	// status is the cgroup's status. Once a Ready has handed it out it
	// is the driver's too and never changed again: edit copies it first.
	status  *state.Status
	shared  bool // handed out by a Ready
	changed bool // in Core.changed
}

// edit returns the status to change: st.status itself, or a copy of it
// when a Ready has handed it out. An idle cgroup's status is thus held
// once, by the Core and its driver together. Only Ready shares a status,
// so within one Advance every call returns the same one.
func (st *cgroup) edit() *state.Status {
	if st.shared {
		s := *st.status
		st.status, st.shared = &s, false
	}
	return st.status
}

// NotLimited is the Status.Unmanaged of a cgroup that limited_only leaves
// alone.
const NotLimited = "it has no memory limit, and no ancestor below the root has one (manage.limited_only)"

// add starts the Core's state of cg.
func (c *Core) add(cg host.Cgroup) *cgroup {
	st := &cgroup{cg: cg, ctrl: policy.NewController(), wake: host.Wake{UsageAbove: memcg.NoLimit, DirtiedAbove: memcg.NoLimit, LevelAbove: memcg.NoLimit},
		status: &state.Status{Cgroup: cg, DryRun: c.cfg.DryRun, DirtyTracking: state.TrackingPoll}}
	st.exempt = policy.Exempt(cg, c.cfg.Self)
	if st.exempt {
		st.status.Exempt, st.status.Throttle = HoldsMemcgd, HoldsMemcgd
		c.log(slog.LevelInfo, HoldsMemcgd, "cgroup", cg, "self", c.cfg.Self)
	}
	if c.cfg.Tracker {
		st.status.DirtyTracking = state.TrackingTracker
	}
	c.cgroups[cg] = st
	c.order = append(c.order, st)
	c.touch(st)
	return st
}

// forget drops st: its episode ends (thawed), its watch, the host's
// resources and its runtime overrides go, and a newer state at its path
// keeps its own.
func (c *Core) forget(st *cgroup) {
	if st.gone {
		return
	}
	c.endPace(st, "cgroup gone")
	c.endEpisode(st, "cgroup gone")
	st.gone = true
	c.noteScanned(st)
	delete(c.cgroups, st.cg)
	for i, o := range c.order {
		if o == st {
			c.order = append(c.order[:i], c.order[i+1:]...)
			break
		}
	}
	delete(c.ancestors, st.cg)
	c.removed = append(c.removed, st.cg)
	c.emit(Op{Kind: Forget, Cgroup: st.cg}, pendingOp{cg: st})
	c.log(slog.LevelInfo, "cgroup gone", "cgroup", st.cg)
}

// setState sets st's Status.State from what the Core holds of it now,
// and Since when it changed.
func (c *Core) setState(st *cgroup) {
	s := ""
	switch {
	case !st.managed:
	case st.thr.isFrozen():
		s = state.StateFrozen
	case st.pace.isOpen():
		s = state.StatePaced
	case st.thr.isOpen():
		s = state.StateThrottled
	case st.active:
		s = state.StateActive
	default:
		s = state.StateIdle
	}
	if s != st.status.State {
		sp := st.edit()
		sp.State, sp.Since = s, c.now
		c.touch(st)
	}
}

// touch marks st's status for the next Ready.
func (c *Core) touch(st *cgroup) {
	if !st.changed {
		st.changed = true
		c.changed = append(c.changed, st)
	}
}

// enqueue puts st in the ready queue, unless it is there already or being
// stepped; a throttled cgroup goes first: its tasks wait on it.
func (c *Core) enqueue(st *cgroup) {
	if st.gone || st.queued || st.stepping || c.stopping {
		return
	}
	st.queued = true
	if st.throttled {
		c.queue = append([]*cgroup{st}, c.queue...)
		return
	}
	c.queue = append(c.queue, st)
}

// wake steps st soon: an event, a kick, a deadline. One waiting for its
// next look is stepped now (the timer entry goes stale), unless it is
// active and this is but a hint; one being stepped is stepped again as
// soon as its step ends, unless this is but a hint.
func (c *Core) wake(st *cgroup, hint bool) {
	if st.gone {
		return
	}
	switch {
	case st.timed && (!st.active || !hint):
		st.timed = false
		st.lookGen++
	case st.timed:
		return // active: its look comes anyway
	case st.stepping:
		if !hint {
			st.again = true
		}
		return
	}
	c.enqueue(st)
}

// startStep hands out st's Observe: its own path and the ancestors whose
// readings cannot be reused.
func (c *Core) startStep(st *cgroup) {
	st.stepping = true
	st.timed = false
	st.lookGen++
	st.stepAt = c.now
	paths := host.Ancestors(st.cg)
	p := pendingOp{cg: st}
	p.cached, p.fromCache = c.spare.take(len(paths))
	var read []host.Cgroup
	for i, a := range paths {
		if i < len(paths)-1 {
			if s, ok := c.ancestor(a); ok {
				p.cached[i], p.fromCache[i] = s, true
				continue
			}
		}
		read = append(read, a)
	}
	// The dirtied counter reads every task's /proc/PID/io without the
	// tracker: only for cgroups managed, or not yet known not to be.
	dirtied := c.cfg.Counter && (st.managed || !st.known)
	c.observing++
	held := st.pace.host() != nil && c.now.Sub(st.pace.heldAt) >= heldReadInterval
	if held {
		st.pace.heldAt = c.now
	}
	c.emit(Op{Kind: Observe, Cgroup: st.cg, Read: read, Dirtied: dirtied, Paced: st.pace.host(), Held: held}, p)
}

// heldReadInterval is how often a paced cgroup's step also reads the time
// its pace held its tasks (Op.Held): a counter for the operator, which
// the policy does not use, so an extra read at every step would be waste.
const heldReadInterval = 100 * time.Millisecond

// observed takes a step's observation: the controller decides, and its
// decision becomes ops and timers.
func (c *Core) observed(p pendingOp, r Result) {
	st := p.cg
	defer c.spare.put(p.cached, p.fromCache)
	st.stepping = false
	again, held := st.again, st.held
	st.again, st.held = false, false
	if st.gone || c.stopping {
		return
	}
	defer func() {
		switch {
		case st.gone:
		case again:
			c.enqueue(st)
		case held && c.paceHolds(st):
			c.lookBy(st, st.stepAt.Add(c.cfg.PacedReportGap))
		case held:
			c.enqueue(st) // the pace ended: nothing holds the cgroup
		}
	}()
	c.noteScanned(st)
	if isVanished(r.Err) || isVanished(r.DirtiedErr) {
		c.forget(st)
		return
	}
	if r.Err != nil {
		c.log(slog.LevelWarn, "observe", "cgroup", st.cg, "err", r.Err)
		st.active = true
		c.look(st, r.At.Add(c.cfg.ScanInterval))
		return
	}
	chain := p.cached
	j := 0
	paths := host.Ancestors(st.cg)
	for i := range chain {
		if p.fromCache[i] {
			continue
		}
		chain[i] = r.Stats[j]
		if i < len(chain)-1 {
			c.keepAncestor(paths[i], r.Stats[j], r.At)
		}
		j++
	}
	knobs := c.spare.knobs[:0]
	for _, a := range paths {
		knobs = append(knobs, c.knobs(a))
	}
	c.spare.knobs = knobs
	s := chain[len(chain)-1]
	eff := memcg.Resolve(chain, knobs)
	st.known = true
	st.managed = policy.Manages(c.policy.LimitedOnly, chain)
	sp := st.edit()
	c.countOverLimit(sp, r.At)
	sp.Stat, sp.Effective, sp.Observed, sp.Managed = s, eff, r.At, st.managed
	sp.Unmanaged = ""
	if !st.managed {
		sp.Unmanaged = NotLimited
	}
	c.touch(st)
	if !st.managed {
		c.endPace(st, "not managed")
		c.endEpisode(st, "not managed")
		st.active, st.throttled = false, false
		sp.Active = false
		c.setState(st)
		c.arm(st, host.Wake{UsageAbove: memcg.NoLimit, DirtiedAbove: memcg.NoLimit, LevelAbove: memcg.NoLimit})
		return
	}
	if p.op.Dirtied {
		switch {
		case r.HasDirtied:
			s.Counters.HasDirtied, s.Counters.DirtiedBytes = true, r.Dirtied.Dirtied
			s.Counters.HasCancelled, s.Counters.CancelledBytes = r.Dirtied.HasCancelled, r.Dirtied.Cancelled
		case r.DirtiedErr != nil:
			c.log(slog.LevelDebug, "count dirtied bytes", "cgroup", st.cg, "err", r.DirtiedErr)
		}
	}
	fz := policy.FreezerNone
	if c.cfg.Freezer && st.unavailable == "" {
		fz = policy.FreezerHeld
	}
	pacer := c.cfg.Pacer && (st.pace == nil || st.pace.unavailable == "") && !st.exempt
	var unpaced int
	var unpacedKnown bool
	var applied policy.Pacing
	var pacedCPU time.Duration
	if st.pace != nil {
		if r.Op.Paced != nil && r.Op.Paced == st.pace.episode {
			st.pace.cpu = r.PacedCPU
			unpaced, unpacedKnown = r.Unpaced, r.UnpacedKnown
			if r.Op.Held {
				c.countHeld(st, r.PacedThrottled)
			}
		}
		applied, pacedCPU = st.pace.applied, st.pace.cpu
	}
	d := st.ctrl.Step(policy.Input{
		Now: r.At, Stat: s, Dirty: eff.Dirty, Watermarks: eff.Watermarks, WritebackFirst: eff.Knobs.WritebackFirst,
		Exempt:  st.exempt,
		Tracker: c.cfg.Tracker && s.Counters.HasDirtied, LevelWakes: c.cfg.Levels,
		Reaction: c.cfg.Reaction, ActiveInterval: c.cfg.ActiveInterval,
		ReclaimStep: c.cfg.ReclaimStep, Freezer: fz, Frozen: fz == policy.FreezerHeld && st.thr.isFrozen(),
		Pacer: pacer, Paced: applied, PacedCPU: pacedCPU, PacePeriodCap: c.cfg.PacePeriodCap,
		Unpaced: unpaced, UnpacedKnown: unpacedKnown,
		PacedBelow: c.pacedBelow(st.cg),
	})
	if c.cfg.Log.Level() <= slog.LevelDebug && (d.Active || !d.Idle()) {
		// One line per decision of a cgroup at work, to set beside
		// samples of the cgroup.
		c.log(slog.LevelDebug, "decision", "cgroup", st.cg, "throttle", d.Throttle, "episode", d.Episode,
			"dirty", s.Dirty, "writeback", s.Writeback, "dirtied", s.Counters.DirtiedBytes,
			"next", d.NextLook, "hold_for", d.HoldFor, "run_for", d.RunFor,
			"wake_dirtied", d.Wake.DirtiedAbove, "write_out", d.WriteOut, "reclaim", d.Reclaim,
			"pace_quota", d.Pace.Quota, "pace_period", d.Pace.Period, "efficiency", st.ctrl.Efficiency(), "paced_cpu", pacedCPU,
			"rate", st.ctrl.DirtyRate(), "bw", st.ctrl.WriteBandwidth(), "why", d.Why)
	}
	// The throttle first (policy.Decision): due now.
	if pacer {
		c.countPaced(st)
		c.carryPace(st, d)
	}
	if fz == policy.FreezerHeld {
		c.carry(st, d, s)
	}
	c.act(st, d, s)
	st.active, st.throttled = d.Active, d.Episode
	sp = st.edit()
	sp.Active = d.Active
	sp.DirtyRate, sp.WriteBandwidth = st.ctrl.DirtyRate(), st.ctrl.WriteBandwidth()
	c.setState(st)
	c.arm(st, host.Wake{UsageAbove: d.Wake.UsageAbove, DirtiedAbove: d.Wake.DirtiedAbove,
		LevelAbove: d.Wake.LevelAbove, LevelBelow: d.Wake.LevelBelow, OnlyArmed: d.Wake.OnlyArmed})
	if d.NextLook > 0 {
		c.look(st, r.At.Add(d.NextLook))
	}
}

// countOverLimit adds to sp's counters the time from its last
// observation to now during which its dirty+writeback was over the dirty
// limit then in force, and over 1.25 times it: the level observed stands
// until the next observation, for at most an active interval, and a
// cgroup not managed then counts nothing.
func (c *Core) countOverLimit(sp *state.Status, now time.Time) {
	limit := sp.Effective.Dirty.Limit
	if !sp.Managed || sp.Observed.IsZero() || !now.After(sp.Observed) || limit == memcg.NoLimit {
		return
	}
	dt := min(now.Sub(sp.Observed), c.cfg.ActiveInterval)
	level := sp.Stat.DirtyAndWriteback()
	if level > limit {
		sp.Counters.OverLimit += dt
	}
	if level > limit+limit/4 {
		sp.Counters.OverLimitQuarter += dt
	}
}

// look puts st's next step on the timer heap at t.
func (c *Core) look(st *cgroup, t time.Time) {
	st.lookGen++
	st.timed, st.lookAt = true, t
	c.at(timer{at: t, kind: timerLook, cg: st, gen: st.lookGen})
}

// lookBy has st's next step come by t: a look already due by then stays.
func (c *Core) lookBy(st *cgroup, t time.Time) {
	if st.timed && !st.lookAt.After(t) {
		return
	}
	c.look(st, t)
}

// paceHolds reports whether reports of st may wait: a gap is set, and a
// pace limits st's tasks.
func (c *Core) paceHolds(st *cgroup) bool {
	return c.cfg.PacedReportGap > 0 && st.pace.isOpen() && st.pace.applied.Limited()
}

// holdReport holds a report of st back until Config.PacedReportGap after
// its last step began, while a pace limits its tasks; it reports whether
// it did. One being stepped is looked at then, unless its decision looks
// sooner; one queued is stepped soon anyway.
func (c *Core) holdReport(st *cgroup) bool {
	if !c.paceHolds(st) {
		return false
	}
	by := st.stepAt.Add(c.cfg.PacedReportGap)
	if !c.now.Before(by) {
		return false
	}
	switch {
	case st.stepping:
		st.held = true
	case !st.queued:
		c.lookBy(st, by)
	}
	return true
}

// arm hands out a Watch when w differs from the watch armed.
func (c *Core) arm(st *cgroup, w host.Wake) {
	if w == st.wake {
		return
	}
	st.wake = w
	c.emit(Op{Kind: Watch, Cgroup: st.cg, Wake: w}, pendingOp{cg: st})
}

// act hands out d's write-out or flush and reclaim, unless an action of
// st's is in flight, or a flush of any cgroup's is.
func (c *Core) act(st *cgroup, d policy.Decision, s memcg.Stat) {
	ctr := &st.edit().Counters
	if d.ReclaimStart {
		ctr.ReclaimRuns++ // seed 001's pgoutrun: the policy says when a run starts
	}
	ctr.ReclaimOvershootBytes += d.ReclaimOvershoot
	switch {
	case st.writing:
	case d.Flush && c.flushing:
		c.log(slog.LevelDebug, "flush skipped: another is in flight", "cgroup", st.cg)
	case d.Flush:
		c.flushing, st.writing = true, true
		ctr.Flushes++
		ctr.FlushBytes += s.Dirty
		c.emit(Op{Kind: Flush, Cgroup: st.cg}, pendingOp{cg: st, stat: s})
		// The reclaim, if any, waits for the next step: a flush
		// covers the cgroup's own files and more.
		return
	case d.WriteOut:
		st.writing = true
		c.emit(Op{Kind: WriteOut, Cgroup: st.cg, Bytes: s.Dirty}, pendingOp{cg: st, stat: s})
	}
	if d.Reclaim > 0 && !st.reclaiming {
		st.reclaiming = true
		c.emit(Op{Kind: Reclaim, Cgroup: st.cg, Bytes: d.Reclaim, Usage: s.Usage}, pendingOp{cg: st, stat: s})
	}
}

// acted takes an action's result: its counters, and the controller
// learns the outcome of reclaim and flush (their backoffs).
func (c *Core) acted(p pendingOp, r Result) {
	st := p.cg
	switch p.op.Kind {
	case Flush:
		c.flushing, st.writing = false, false
	case WriteOut:
		st.writing = false
	case Reclaim:
		st.reclaiming = false
	}
	if st.gone {
		return
	}
	ctr := &st.edit().Counters
	defer c.touch(st)
	switch p.op.Kind {
	case WriteOut:
		if r.WriteOut.Files > 0 {
			// Only write-outs that found files count: the dirty pages
			// of files no task holds open are out of its reach.
			ctr.WriteOuts++
			ctr.WriteOutBytes += r.WriteOut.Bytes
			if r.WriteOut.Yielded {
				ctr.WriteOutsYielded++
			}
		}
		if st.thr.isOpen() {
			st.thr.writtenOut += r.WriteOut.Bytes
		}
		c.failed(st, "write out", r.Err)
	case Flush:
		st.ctrl.FlushDone(r.At, p.stat, errors.Is(r.Err, host.ErrNothingToFlush))
		switch {
		case r.Err == nil, isVanished(r.Err):
		case errors.Is(r.Err, host.ErrRateLimited), errors.Is(r.Err, host.ErrNothingToFlush):
			// Refused, not failed: counted apart.
			c.log(slog.LevelDebug, "flush refused", "cgroup", st.cg, "err", r.Err)
			ctr.FlushesRefused++
		default:
			c.failed(st, "flush", r.Err)
		}
	case Reclaim:
		ctr.ReclaimedBytes += r.Reclaimed
		nothing := errors.Is(r.Err, host.ErrNothingReclaimed)
		st.ctrl.ReclaimDone(r.At, p.stat, r.Err != nil && !isVanished(r.Err), c.cfg.ActiveInterval)
		if !nothing {
			c.failed(st, "reclaim", r.Err)
		}
		c.log(slog.LevelDebug, "reclaim attempt", "cgroup", st.cg, "got", r.Reclaimed, "err", r.Err)
	}
}

// failed counts and logs an action's error; a vanished cgroup is found by
// its next step.
func (c *Core) failed(st *cgroup, what string, err error) {
	if err == nil || isVanished(err) {
		return
	}
	st.edit().Counters.Errors++
	c.log(slog.LevelWarn, what, "cgroup", st.cg, "err", err)
}

// knobs are the knobs in force for cg: the config's defaults and rules,
// then the runtime overrides.
func (c *Core) knobs(cg host.Cgroup) memcg.Knobs {
	return resolve.Knobs(c.policy, c.cfg.Overrides, cg)
}

// noteScanned counts st as stepped for the first listing.
func (c *Core) noteScanned(st *cgroup) {
	if !st.firstScan {
		return
	}
	st.firstScan = false
	c.unscanned--
	if c.unscanned == 0 {
		c.scanned = true
	}
}

// isVanished reports whether err says the cgroup is gone.
func isVanished(err error) bool { return errors.Is(err, host.ErrVanished) }
