package policy

import (
	"math"
	"time"

	"github.com/memcgd/memcgd/memcg"
)

// The paced throttle (Input.Pacer): the dirtying tasks alone run under a
// CPU bandwidth limit (the CFS bandwidth controller: cpu.cfs_quota_us and
// cpu.cfs_period_us on v1, cpu.max on v2), which sends no signal and cuts
// no syscall short: a paced task's write(2) completes, later. The law is
// balance_dirty_pages()'s (mm/page-writeback.c): past the freerun
// ceiling the dirtiers may dirty at
//
//	task_ratelimit = dirty_ratelimit * pos_ratio
//
// where dirty_ratelimit, with the cgroup as the only dirtier of its
// domain, is the measured write bandwidth, and pos_ratio falls along the
// cubic of pos_ratio_polynom() from 2 at freerun through 1 at the
// setpoint to 0 at the limit. The kernel enforces its rate by sleeping
// the task every few pages; memcgd converts it to CPU time: a share of a
// CPU lets the paced tasks dirty Efficiency bytes per second of it, so the
// share they get is task_ratelimit / Efficiency, Efficiency measured at
// every step from what the share in force achieved.
// The kernel then enforces the share between the daemon's looks, which
// need come only every PaceInterval. A wrong Efficiency is corrected by
// the law itself: dirtying too fast raises dirty, which lowers pos_ratio.
//
// Within a period a paced task runs its quota at full speed, a burst past
// the rate, so the quota is as small as CFS takes, a millisecond
// (min_cfs_quota_period in kernel/sched/core.c, tg_set_cfs_bandwidth),
// and the period what gives the share (PaceFor): a 1.5 GB/s writer then
// bursts 1.5 MB at most.
//
// The freezer stays as the backstop, for what the pace does not hold:
// tasks the driver could not pace, a dirtier that is not CPU-bound. When
// dirty+writeback is past the limit (backstopLevel) and still rises
// although the pace has been at its least for PaceInterval, the closed
// loop of freeze.go freezes the cgroup. It is rare, and counted. A paced
// task's burst (CFS throttles it at its next tick past its quota, a
// scheduler tick of its CPU: 4 ms at HZ=250) can pass the limit by that
// much without it: the pace's resolution, which a limit of a few bursts
// cannot be held within.

// Pacing is a CPU bandwidth limit of a cgroup's dirtying tasks: Quota of
// CPU time per Period. The zero Pacing is none: the tasks are released. A
// Pacing with a Period and no Quota keeps them paced without a limit
// (cpu.cfs_quota_us -1, cpu.max "max"): below the freerun ceiling, within
// PaceLinger, so that a writer that dirties again is held at once
// without moving its tasks again.
type Pacing struct {
	Quota, Period time.Duration
}

// On reports whether p keeps the tasks paced.
func (p Pacing) On() bool { return p.Period > 0 }

// Limited reports whether p limits their CPU.
func (p Pacing) Limited() bool { return p.On() && p.Quota > 0 }

// Share is the share of one CPU p allows; 0 when it allows any.
func (p Pacing) Share() float64 {
	if !p.Limited() {
		return 0
	}
	return float64(p.Quota) / float64(p.Period)
}

// Unlimited is the Pacing that keeps the tasks paced without a limit.
var Unlimited = Pacing{Period: 100 * time.Millisecond}

// The paced throttle's constants.
const (
	// MinPacePeriod and MaxPacePeriod are the shortest and longest
	// period CFS takes (min_cfs_quota_period, max_cfs_quota_period in
	// kernel/sched/core.c: a millisecond, a second).
	MinPacePeriod = time.Millisecond
	MaxPacePeriod = time.Second
	// MinPaceQuota is the least quota CFS takes (min_cfs_quota_period,
	// one millisecond).
	MinPaceQuota = time.Millisecond
	// PaceInterval is how often a paced cgroup is looked at: the kernel
	// holds the pace between looks, and pos_ratio moves little in a few
	// milliseconds of a pace near the device's speed.
	PaceInterval = 5 * time.Millisecond
	// PaceLevelLook is how often a paced cgroup is looked at when the
	// watcher reports its dirty+writeback level (Input.LevelWakes).
	PaceLevelLook = 50 * time.Millisecond
	// PaceLinger is how long a pace stays after dirty+writeback fell to
	// the freerun ceiling: a writer that dirties again within it is paced
	// at once, without moving its tasks again.
	PaceLinger = time.Second
	// DefaultEfficiency is the bytes a task dirties per CPU-second
	// assumed before the daemon has measured it: a 1 MiB write(2) of a
	// buffer into page cache costs about 0.7 ms of CPU on current x86
	// (1.5 GB/s).
	DefaultEfficiency = 1500e6
	// efficiencyWindow is the averaging window of the measured
	// efficiency.
	efficiencyWindow = 200 * time.Millisecond
)

// pacer is the paced throttle's memory of one cgroup.
type pacer struct {
	on bool
	// below is when dirty+writeback last fell to freerun while on.
	below time.Time
	// efficiency is the bytes dirtied per second of one CPU's share
	// granted to the paced tasks, measured; zero until measured.
	efficiency float64
	// least is when the least pace (pos_ratio 0, at or past the limit)
	// came into force, zero while another is; level is dirty+writeback
	// at the last step, rising that it rose at it.
	least  time.Time
	level  uint64
	rising bool
	// leastLevel, leastDirtied, leastCPU and leastEff are
	// dirty+writeback, the dirtied counter (if leastHasDirtied), the
	// paced tasks' CPU time and the efficiency when the pace went to its
	// least: the efficiency measured since would count what an escaped
	// dirtier dirties as the paced tasks'.
	leastLevel, leastDirtied uint64
	leastHasDirtied          bool
	leastCPU                 time.Duration
	leastEff                 float64
	// leastRefills counts the refills asked for since (staleTimer).
	leastRefills int
	// lastAt and lastDirtied are the time and the dirtied counter where
	// the efficiency's measurement window began, measured says one has;
	// granted is the CPU time the paces in force granted since (share
	// times time), counted up to grantedAt, and span the longest period
	// among them.
	lastAt      time.Time
	lastDirtied uint64
	measured    bool
	granted     time.Duration
	grantedAt   time.Time
	span        time.Duration
	// inForce is the pace in force at the last step; timerBy is until
	// when the group's period timer may still be armed for a longer
	// period than the one in force, and refilled when the pace was last
	// written (staleTimer).
	inForce           Pacing
	timerBy, refilled time.Time
	// cap is the longest period, as periodCap last chose it; longest is
	// the longest period of this step's paces, chosen once per step.
	cap, longest time.Duration
}

// pace decides the CPU bandwidth of the cgroup's dirtying tasks.
func (c *Controller) pace(in Input, dirty uint64, d *Decision) {
	if in.Dirty.Limit == memcg.NoLimit || in.Exempt {
		if c.pacer != nil {
			*c.pacer = pacer{efficiency: c.pacer.efficiency}
		}
		return
	}
	if c.pacer == nil {
		if dirty <= in.Dirty.Background && !in.Paced.On() {
			// Never paced, and nothing to pace now: nothing to
			// measure or remember yet. The first pace then chooses
			// its period cap afresh (periodCap).
			return
		}
		c.pacer = new(pacer)
	}
	p := c.pacer
	c.measureEfficiency(in)
	p.longest = c.periodCap(in)
	freerun := in.Dirty.Freerun()
	c.leastInForce(in, dirty)
	switch {
	case dirty > freerun:
		p.on, p.below = true, time.Time{}
	case dirty > in.Dirty.Background:
		// Past the background threshold the pace begins, its threads
		// moved, without a limit but the headroom's: a move waits for
		// an RCU grace period (cgroup_threadgroup_rwsem), milliseconds
		// in which a writer dirties megabytes, and past freerun the
		// pace is then one write of the quota away.
		p.on, p.below = true, time.Time{}
		c.unlimitedPace(in, dirty, d)
		return
	case !p.on:
		return
	case p.below.IsZero():
		p.below = in.Now
		fallthrough
	case in.Now.Sub(p.below) < PaceLinger:
		c.unlimitedPace(in, dirty, d)
		return
	default:
		*p = pacer{efficiency: p.efficiency}
		return
	}
	setpoint, limit := DirtySetpoint(in.Dirty, c.domainLimit)
	pos := PosRatio(int64(setpoint/memcg.PageSize), int64(dirty/memcg.PageSize), int64(limit/memcg.PageSize))
	rate := TaskRatelimit(c.WriteBandwidth(), pos)
	share := min(float64(rate)/c.efficiency(), c.headroomShare(dirty, limit))
	d.Pace = c.keep(PaceFor(share, p.longest), in.Paced)
	c.staleTimer(in, d)
	p.rising, p.level = dirty > p.level, dirty
	d.Why |= ReasonThrottle
	d.Active = true
}

// paced reports whether the pace is on: the cgroup can be paced (the
// pacer's state is not kept up while it cannot), and it is past the
// background threshold or below it within PaceLinger.
func (c *Controller) paced(in Input) bool { return in.Pacer && c.pacer != nil && c.pacer.on }

// staleTimer asks for the pace in force to be written again
// (Decision.PaceRefill) every period while the group's period timer may
// still be armed for a longer period than the one in force. A write of
// the bandwidth starts the period timer only if it is idle
// (kernel/sched/core.c, tg_set_cfs_bandwidth; kernel/sched/fair.c,
// start_cfs_bandwidth returns while period_active), so after a shorter
// period is written the timer still fires at the expiry the longer one
// set, and a group that has spent its quota stays throttled until then:
// up to a second after a least pace, whatever its new period. Each write
// refills the quota and unthrottles the group, so until that expiry the
// daemon is the period timer. Unlimited counts as a longer period too,
// although the timer stops at its next expiry once the quota is
// RUNTIME_INF (do_sched_cfs_period_timer in kernel/sched/fair.c): the
// refills after it grant a fresh quota at a look that kept the pace, which
// a writer paced near its limit leans on (docs/throttle.md, "The period
// timer").
func (c *Controller) staleTimer(in Input, d *Decision) {
	p := c.pacer
	shorter := func(from, to Pacing) {
		if from.On() && to.On() && to.Period < from.Period {
			if t := in.Now.Add(from.Period); t.After(p.timerBy) {
				p.timerBy = t
			}
		}
	}
	shorter(p.inForce, in.Paced) // written since the last step
	shorter(in.Paced, d.Pace)    // to be written now
	p.inForce = in.Paced
	switch {
	case d.Pace != in.Paced:
		p.refilled = in.Now // the write refills
	case d.Pace.Limited() && in.Now.Before(p.timerBy) && in.Now.Sub(p.refilled) >= d.Pace.Period-MinLook:
		d.PaceRefill, p.refilled = true, in.Now
		if !p.least.IsZero() {
			p.leastRefills++
		}
	}
}

// refillIn is how soon the pace in force must be written again
// (staleTimer); 0 if it need not be.
func (c *Controller) refillIn(in Input, d Decision) time.Duration {
	p := c.pacer
	if p == nil || !d.Pace.Limited() || !in.Now.Before(p.timerBy) {
		return 0
	}
	return max(p.refilled.Add(d.Pace.Period).Sub(in.Now), MinLook)
}

// unlimitedPace keeps the tasks paced below freerun, where the kernel
// throttles nothing (balance_dirty_pages() returns at once): without a
// limit but the headroom's, so that the device is fed and its bandwidth
// measured at its speed, not at a pace's.
func (c *Controller) unlimitedPace(in Input, dirty uint64, d *Decision) {
	d.Pace = Unlimited
	_, limit := DirtySetpoint(in.Dirty, c.domainLimit)
	if share := c.headroomShare(dirty, limit); share < 1 {
		d.Pace = c.keep(PaceFor(share, c.pacer.longest), in.Paced)
	}
	c.staleTimer(in, d)
	d.Active = true
	c.pacer.rising, c.pacer.level = false, dirty
}

// leastPace is this step's least pace: MinPaceQuota in the longest
// period.
func (c *Controller) leastPace() Pacing {
	if c.pacer == nil {
		return PaceFor(0, 0)
	}
	return PaceFor(0, c.pacer.longest)
}

// leastInForce notes when the least pace came into force (in.Paced, as
// the driver holds it: a pace asked for takes hold only once its threads
// have moved), with the level and the dirtied counter then.
func (c *Controller) leastInForce(in Input, dirty uint64) {
	p := c.pacer
	if !in.Paced.Limited() || in.Paced != c.leastPace() {
		p.least = time.Time{}
		return
	}
	if p.least.IsZero() {
		p.least, p.leastLevel, p.leastEff, p.leastCPU, p.leastRefills = in.Now, dirty, c.efficiency(), in.PacedCPU, 0
		p.leastDirtied, p.leastHasDirtied = in.Stat.Counters.DirtiedBytes, in.Stat.Counters.HasDirtied
	}
}

// periodCap is the longest period a pace may have: in.PacePeriodCap, and
// no longer than the least pace needs. The least pace, MinPaceQuota per
// period, lets the tasks dirty Efficiency * MinPaceQuota a period, which
// a period of leastPaceMargin times that at the write bandwidth keeps to
// a fraction of what the device cleans; a longer one only stops the
// tasks for longer, and leaves the period timer armed for longer once a
// shorter period follows (staleTimer). Rounded up to a power of two
// milliseconds, so that it moves only when the estimates do by a factor.
func (c *Controller) periodCap(in Input) time.Duration {
	limit := in.PacePeriodCap
	if limit <= 0 {
		limit = MaxPacePeriod // PaceFor clamps the rest
	}
	p := c.pacer
	bw := float64(c.WriteBandwidth())
	if bw <= 0 {
		return limit
	}
	need := time.Duration(leastPaceMargin * c.efficiency() * float64(MinPaceQuota) / bw)
	// Kept while it is within a factor of four of the need, and while
	// the least pace is in force, so that the least pace stays one pace
	// while the estimates wander (the backstop counts from when it came
	// into force, leastInForce).
	least := p.cap > 0 && in.Paced == PaceFor(0, min(p.cap, limit))
	if !least && (p.cap == 0 || need > p.cap || need < p.cap/4) {
		p.cap = minLeastPeriod
		for p.cap < need && p.cap < MaxPacePeriod {
			p.cap *= 2
		}
	}
	return min(p.cap, limit)
}

// leastPaceMargin is how many times what the least pace lets the tasks
// dirty the device cleans meanwhile (periodCap); minLeastPeriod is the
// shortest period of the least pace, a few looks (PaceInterval).
const (
	leastPaceMargin = 4
	minLeastPeriod  = 16 * time.Millisecond
)

// keep is pace p, or the pace in force when p is within PaceTolerance of
// it: each write of a quota refills the group's runtime and unthrottles
// it (kernel/sched/core.c, tg_set_cfs_bandwidth), so rewriting it at
// every step would grant a burst a step.
func (c *Controller) keep(p, inForce Pacing) Pacing {
	if close(p, inForce) {
		return inForce
	}
	return p
}

// headroomShare is the largest share of a CPU that cannot take
// dirty+writeback from level past limit before the next look: in
// PaceInterval the paced tasks dirty share * efficiency * PaceInterval
// while the device cleans WriteBandwidth * PaceInterval. The kernel
// applies its law every few pages (balance_dirty_pages_ratelimited());
// the daemon's law holds for a look's time, so that a task dirtying
// gigabytes per CPU-second, released below freerun or paced at twice the
// bandwidth just above it, would pass the limit within one look.
func (c *Controller) headroomShare(level, limit uint64) float64 {
	h := PaceInterval.Seconds()
	room := float64(limit) - float64(level) + float64(c.WriteBandwidth())*h
	return max(room, 0) / (c.efficiency() * h)
}

// headroomLevel inverts headroomShare: the level at which it is share.
func (c *Controller) headroomLevel(share float64, limit uint64) uint64 {
	h := PaceInterval.Seconds()
	l := float64(limit) + float64(c.WriteBandwidth())*h - share*c.efficiency()*h
	return uint64(max(l, 0))
}

// Efficiency is the bytes the cgroup's dirtying tasks dirty per second of
// one CPU's share granted to them, as the pace measured it (or assumes it,
// before a measurement).
func (c *Controller) Efficiency() uint64 { return uint64(c.efficiency()) }

// paceBand is the dirty+writeback range within which pace p stands: the
// levels at which pos_ratio, and so the share, would have moved by
// PaceTolerance (the cubic of pos_ratio_polynom() inverted:
// dirty = setpoint - (limit - setpoint) * cbrt(pos - 1)), the freerun
// ceiling below, and the backstop above when the pace is at its least.
//
// The share is the least of the law's and the headroom's
// (headroomShare), both falling as the level rises, so each edge is the
// lower of the two curves' levels for the share at that edge.
func (c *Controller) paceBand(in Input, p Pacing) (above, below uint64) {
	setpoint, limit := DirtySetpoint(in.Dirty, c.domainLimit)
	freerun := in.Dirty.Freerun()
	if !p.Limited() {
		// Unlimited below freerun: wake when it is passed, or when the
		// headroom would limit the pace.
		return min(freerun, c.headroomLevel(1, limit)), 0
	}
	law := func(share float64) uint64 {
		bw := float64(c.WriteBandwidth())
		if bw == 0 {
			return freerun
		}
		pos := share * c.efficiency() / bw
		switch {
		case pos >= 2:
			return freerun
		case pos <= 0:
			return limit
		}
		x := math.Cbrt(pos - 1)
		d := float64(setpoint) - float64(sat(limit, setpoint))*x
		return uint64(min(max(d, float64(freerun)), float64(limit)))
	}
	at := func(share float64) uint64 {
		return min(law(share), c.headroomLevel(share, limit))
	}
	s := p.Share()
	above, below = at(s*(1-PaceTolerance)), at(s*(1+PaceTolerance))
	if p == c.leastPace() {
		above = c.backstopLevel(in)
	}
	return max(above, below+memcg.PageSize), below
}

// PaceTolerance is how far a new pace's share may be from the one in
// force before it is written: a fraction of it.
const PaceTolerance = 0.25

// close reports whether pace a is within PaceTolerance of b, both limits.
func close(a, b Pacing) bool {
	if !a.Limited() || !b.Limited() {
		return a == b
	}
	r := a.Share() / b.Share()
	return r >= 1-PaceTolerance && r <= 1+PaceTolerance
}

// PaceOverrun is how long past its quota a paced task may run before CFS
// throttles it: to its next scheduler tick (account_cfs_rq_runtime in
// kernel/sched/fair.c; 4 ms at HZ=250), and on 6.18 on to its return to
// user space.
const PaceOverrun = 4 * time.Millisecond

// escaped reports whether dirty+writeback still rises although the pace
// has been at its least for PaceInterval, and something the pace does not
// hold dirties (a task not paced, a dirtier not CPU-bound): the freezer
// may take over. Where the driver names the dirtying threads
// (Input.UnpacedKnown), a thread it does not pace is that something.
// Elsewhere it is dirtying past what the least pace lets its tasks dirty,
// at the efficiency measured before: twice the CPU time they used since,
// where the driver reads it (a paced task dirties as fast as before, or
// somewhat faster once its pages are cached; the efficiency, per share
// granted, reads below the bytes per CPU-second used where CFS delivered
// less than the share, and the factor of two covers that), and
// PaceOverrun more; else
// a quota and an overrun for each grant of a quota since: the write of
// the least pace, each refill (Decision.PaceRefill) and each period's.
// The cgroup's dirtied bytes tell it where the driver counts them, its
// level otherwise.
func (p *pacer) escaped(in Input, dirty uint64) bool {
	if p == nil {
		return false // never paced
	}
	since := in.Now.Sub(p.least)
	if !p.rising || p.least.IsZero() || since < PaceInterval {
		return false
	}
	if in.UnpacedKnown {
		return in.Unpaced > 0
	}
	burst := p.leastEff * (MinPaceQuota + PaceOverrun).Seconds()
	allowed := uint64(burst * float64(2+p.leastRefills+int(since/max(in.Paced.Period, MinPacePeriod))))
	if in.PacedCPU > 0 && p.leastCPU > 0 && in.PacedCPU >= p.leastCPU {
		allowed = uint64(p.leastEff * (2*(in.PacedCPU-p.leastCPU) + PaceOverrun).Seconds())
	}
	if c := in.Stat.Counters; c.HasDirtied && p.leastHasDirtied {
		return sat(c.DirtiedBytes, p.leastDirtied) > allowed
	}
	return sat(dirty, p.leastLevel) > allowed
}

// efficiency is the measured bytes the paced tasks dirty per second of
// one CPU's share granted (measureEfficiency), or before a measurement the
// recent dirtying rate on one CPU, or DefaultEfficiency.
func (c *Controller) efficiency() float64 {
	switch {
	case c.pacer != nil && c.pacer.efficiency > 0:
		return c.pacer.efficiency
	case c.dirtyRate > 0:
		return c.dirtyRate
	}
	return DefaultEfficiency
}

// measureEfficiency folds in the bytes the cgroup dirtied per second of
// the share the paces in force granted, over a window of at least their
// longest period: what asking for a share achieves, end to end. CFS does
// not deliver the share it is given. A task runs past its quota to its
// next tick (kernel/sched/fair.c, account_cfs_rq_runtime), a CPU's run
// queue keeps up to a quota's runtime when its tasks move
// (__return_cfs_rq_runtime), and each write of the quota refills it
// (kernel/sched/core.c, tg_set_cfs_bandwidth). So the CPU time the paced
// tasks use is not the share asked for: more at the least pace, less at
// higher ones. Measured per share granted, the law's share
// (task_ratelimit / Efficiency) asks for what yields the rate, whatever
// CFS makes of it. Within a period a task gets its quota or nothing, so
// the window stays open until it spans the longest period in it. A pace
// without a quota grants no share: it ends the window, and teaches
// nothing. The estimate moves by at most a factor of two a window, so
// that one odd window does not make the next pace a free run or a stop.
func (c *Controller) measureEfficiency(in Input) {
	p := c.pacer
	dirtied := in.Stat.Counters.DirtiedBytes
	if !in.Paced.Limited() || !in.Stat.Counters.HasDirtied || !p.measured || !in.Now.After(p.lastAt) || dirtied < p.lastDirtied {
		p.mark(in, in.Paced.Limited() && in.Stat.Counters.HasDirtied)
		return
	}
	// The pace in force now is the one written at the last step, in
	// force since (the driver reports a pace once it holds).
	p.granted += time.Duration(float64(in.Now.Sub(p.grantedAt)) * in.Paced.Share())
	p.grantedAt = in.Now
	p.span = max(p.span, in.Paced.Period)
	if in.Now.Sub(p.lastAt) < p.span {
		return // the window stays open
	}
	if p.granted > 0 && dirtied > p.lastDirtied {
		e := float64(dirtied-p.lastDirtied) / p.granted.Seconds()
		if p.efficiency == 0 {
			p.efficiency = e
		} else {
			w := min(float64(in.Now.Sub(p.lastAt))/float64(efficiencyWindow), 1)
			p.efficiency = min(max(e*w+p.efficiency*(1-w), p.efficiency/2), p.efficiency*2)
		}
	}
	p.mark(in, true)
}

// mark begins a measurement window at in.
func (p *pacer) mark(in Input, measured bool) {
	p.lastAt, p.lastDirtied, p.measured = in.Now, in.Stat.Counters.DirtiedBytes, measured
	p.granted, p.grantedAt, p.span = 0, in.Now, 0
}

// PaceFor is the pace that gives share of one CPU, in the smallest bursts
// CFS allows: a paced task runs its whole quota at full speed once the
// period refills it, so the quota is MinPaceQuota and the period what
// gives the share, from MinPacePeriod up to MaxPacePeriod; a share above
// one CPU (several dirtying tasks) gets the share of MinPacePeriod. A
// share too small for that is MinPaceQuota per MaxPacePeriod, the least
// CFS can give.
//
// longest caps the period (0: MaxPacePeriod). Before the task-based CFS
// throttle of 6.18, a throttled task can be descheduled holding a kernel
// lock (a jbd2 handle in ext4's write path), so that others wait out the
// rest of its period: a short period bounds that wait, at the cost of a
// larger least share (the freezer's backstop then holds the rest).
func PaceFor(share float64, longest time.Duration) Pacing {
	if longest <= 0 || longest > MaxPacePeriod {
		longest = MaxPacePeriod
	}
	longest = max(longest, MinPacePeriod)
	if share <= 0 {
		return Pacing{Quota: MinPaceQuota, Period: longest}
	}
	period := min(max(time.Duration(float64(MinPaceQuota)/share), MinPacePeriod), longest)
	quota := max(time.Duration(share*float64(period)), MinPaceQuota)
	return Pacing{Quota: quota.Round(time.Microsecond), Period: period.Round(time.Microsecond)}
}
