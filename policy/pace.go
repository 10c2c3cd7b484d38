package policy

import (
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
// the task every few pages; memcgd converts it to CPU time: the paced
// tasks dirty Efficiency bytes per CPU-second they run, so the share of
// a CPU they may use is task_ratelimit / Efficiency, measured and
// corrected at every step from the CPU the paced tasks actually used.
// The kernel then enforces the share between the daemon's looks, which
// need come only every PaceInterval. A wrong Efficiency is corrected by
// the law itself: dirtying too fast raises dirty, which lowers pos_ratio.
//
// CFS takes a quota of at least a millisecond per period
// (min_cfs_quota_period in kernel/sched/core.c, tg_set_cfs_bandwidth),
// so a small share needs a long period: the period is the shortest of
// PacePeriod and up to MaxPacePeriod that gives the share a quota of at
// least MinPaceQuota. Within a period a paced task runs its quota at full
// speed, so the period also bounds the burst past the rate.
//
// The freezer stays as the backstop: when dirty+writeback passes the
// limit by a quarter of the band the throttle works in despite the pace
// (tasks the driver could not pace, a writer that is not CPU-bound), the
// closed loop of freeze.go freezes the cgroup. It is rare, and counted.

// Pacing is a CPU bandwidth limit of a cgroup's dirtying tasks: Quota of
// CPU time per Period. The zero Pacing is no limit.
type Pacing struct {
	Quota, Period time.Duration
}

// On reports whether p limits anything.
func (p Pacing) On() bool { return p.Period > 0 }

// Share is the share of one CPU p allows.
func (p Pacing) Share() float64 {
	if !p.On() {
		return 0
	}
	return float64(p.Quota) / float64(p.Period)
}

// The paced throttle's constants.
const (
	// PacePeriod is the CFS period of a pace: short, so that a paced
	// task's bursts at full speed are short too.
	PacePeriod = 10 * time.Millisecond
	// MaxPacePeriod is the longest period CFS takes (max_cfs_quota_period,
	// one second).
	MaxPacePeriod = time.Second
	// MinPaceQuota is the least quota CFS takes (min_cfs_quota_period,
	// one millisecond).
	MinPaceQuota = time.Millisecond
	// PaceInterval is how often a paced cgroup is looked at: the kernel
	// holds the pace between looks, and pos_ratio moves little in a few
	// milliseconds of a pace near the device's speed.
	PaceInterval = 5 * time.Millisecond
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
	// efficiency is the bytes dirtied per CPU-second of the paced tasks,
	// measured; zero until measured.
	efficiency float64
	// lastCPU and lastDirtied are the paced tasks' CPU time and the
	// dirtied counter at the last step while paced.
	lastCPU     time.Duration
	lastDirtied uint64
	measured    bool
}

// pace decides the CPU bandwidth of the cgroup's dirtying tasks.
func (c *Controller) pace(in Input, dirty uint64, d *Decision) {
	p := &c.pacer
	if in.Dirty.Limit == memcg.NoLimit || in.Exempt {
		*p = pacer{efficiency: p.efficiency}
		return
	}
	c.measureEfficiency(in)
	freerun := in.Dirty.Freerun()
	switch {
	case dirty > freerun:
		p.on, p.below = true, time.Time{}
	case !p.on:
		return
	case p.below.IsZero():
		p.below = in.Now
	case in.Now.Sub(p.below) >= PaceLinger:
		*p = pacer{efficiency: p.efficiency}
		return
	}
	setpoint, limit := DirtySetpoint(in.Dirty, c.domainLimit)
	pos := PosRatio(int64(setpoint/memcg.PageSize), int64(dirty/memcg.PageSize), int64(limit/memcg.PageSize))
	rate := TaskRatelimit(c.WriteBandwidth(), pos)
	d.Pace = PaceFor(float64(rate) / c.efficiency())
	d.Why |= ReasonThrottle
	d.Active = true
}

// efficiency is the measured bytes dirtied per CPU-second of the paced
// tasks, or before a measurement the recent dirtying rate on one CPU, or
// DefaultEfficiency.
func (c *Controller) efficiency() float64 {
	switch {
	case c.pacer.efficiency > 0:
		return c.pacer.efficiency
	case c.dirtyRate > 0:
		return c.dirtyRate
	}
	return DefaultEfficiency
}

// measureEfficiency folds in the bytes dirtied per CPU-second the paced
// tasks used since the last step, when the driver reports both.
func (c *Controller) measureEfficiency(in Input) {
	p := &c.pacer
	if !in.Paced.On() || !in.Stat.Counters.HasDirtied {
		p.measured = false
		return
	}
	cpu, dirtied := in.PacedCPU, in.Stat.Counters.DirtiedBytes
	if p.measured && cpu > p.lastCPU && dirtied >= p.lastDirtied {
		used := cpu - p.lastCPU
		e := float64(dirtied-p.lastDirtied) / used.Seconds()
		if p.efficiency == 0 {
			p.efficiency = e
		} else {
			w := min(float64(used)/float64(efficiencyWindow), 1)
			p.efficiency = e*w + p.efficiency*(1-w)
		}
	}
	p.lastCPU, p.lastDirtied, p.measured = cpu, dirtied, true
}

// PaceFor is the pace that gives share of one CPU: the period is
// PacePeriod unless the quota would be below MinPaceQuota, then as long
// as it takes, up to MaxPacePeriod; a share too small for that is
// MinPaceQuota per MaxPacePeriod, the least CFS can give.
func PaceFor(share float64) Pacing {
	if share <= 0 {
		return Pacing{Quota: MinPaceQuota, Period: MaxPacePeriod}
	}
	period := PacePeriod
	if q := time.Duration(share * float64(period)); q < MinPaceQuota {
		period = min(time.Duration(float64(MinPaceQuota)/share), MaxPacePeriod)
	}
	quota := max(time.Duration(share*float64(period)), MinPaceQuota)
	return Pacing{Quota: quota.Round(time.Microsecond), Period: period.Round(time.Microsecond)}
}
