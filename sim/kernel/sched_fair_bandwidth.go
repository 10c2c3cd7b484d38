package kernel

import (
	"fmt"
	"time"
)

// CFS bandwidth control (kernel/sched/fair.c, "CFS bandwidth control
// machinery"; the cgroup files in kernel/sched/core.c): a cpu group (task
// group) with a quota of CPU time per period. Its tasks' CPU time is
// charged against the runtime left in the period; when it runs out the
// group is throttled, its tasks do not run, and the period timer refills
// the runtime (quota, up to quota + burst) and unthrottles it. A group's
// tasks are charged to every ancestor group too, so a child is also held
// by its parent's quota. This is cpu.max on cgroup v2 and
// cpu.cfs_quota_us / cpu.cfs_period_us (cpu.cfs_burst_us) on v1, where a
// group holds whichever threads are written to its tasks file; on v2 a
// threaded cgroup does the same. A task's memory cgroup does not change
// with its cpu group.
//
// How the model charges time. A task's CPU time is what its step spent
// (its clock's advance: copying pages, reclaiming, computing), charged
// when the step ends, and a throttled group's tasks stop at the start of
// their next step. So a group overruns its runtime by at most one step
// (stepBudget plus one block), as the kernel's by up to a tick; the overrun
// is owed and paid from the next refill, as distribute_cfs_runtime() pays
// a cfs_rq's negative runtime_remaining. A task stops wherever its step
// ended, in the middle of a write(2) as well, as the cfs_rq throttle does;
// nothing returns early and no signal is sent: the system call completes
// when the task runs again.
//
// Simplifications: one runtime pool per group (the kernel hands it to each
// CPU's cfs_rq in slices of sched_cfs_bandwidth_slice(), 5 ms, and returns
// slack; here tasks never wait for a CPU, so there is nothing per CPU to
// strand); the period timer's first expiry is the group's creation, not
// a random offset; the task-based throttle of 6.18 (which defers the stop
// to the return to user mode) is not modelled, nor is a throttled task
// holding a lock (an inode's, a journal handle) that others wait for.

// Constants of kernel/sched/core.c and fair.c.
const (
	// DefaultCFSPeriod is default_cfs_period(), 100 ms.
	DefaultCFSPeriod = 100 * Millisecond
	// minCFSQuotaPeriod is min_cfs_quota_period: the least period and
	// quota.
	minCFSQuotaPeriod = Millisecond
	// maxCFSQuotaPeriod is max_cfs_quota_period.
	maxCFSQuotaPeriod = Second
	// bwShift is BW_SHIFT, the fixed point of to_ratio().
	bwShift = 20
	// maxCFSRuntime is max_cfs_runtime, MAX_BW microseconds.
	maxCFSRuntime = Time((1<<(64-bwShift))-1) * Microsecond
)

// RuntimeInf is RUNTIME_INF: no quota ("max" in cpu.max, -1 in
// cpu.cfs_quota_us).
const RuntimeInf Time = -1

// cfsBandwidth is struct cfs_bandwidth of one cpu group (struct
// task_group). Group 0 is the root task group, which has none.
type cfsBandwidth struct {
	name   string
	parent int32
	// Settings (tg_set_cfs_bandwidth).
	period, quota, burst Time
	// runtime is what is left of this period's quota; below zero it is
	// the group's overrun, owed to the next refill.
	runtime Time
	// The period timer (period_timer): periodActive while armed, for
	// expires; idle marks a period without use, after which it stops.
	periodActive, idle bool
	expires            Time
	timerGen           uint32
	// throttled since throttledClock; waiters are the tasks stopped on it.
	throttled      bool
	throttledClock Time
	waiters        []int32
	stat           CPUStat
}

// CPUStat is a cpu group's cpu.stat: usage_usec (its tasks' CPU time,
// its descendants' included), nr_periods, nr_throttled (periods that
// ended throttled) and throttled_time / throttled_usec (time spent
// throttled, counted when a throttle ends), as simulated time.
type CPUStat struct {
	Usage                  Time
	NrPeriods, NrThrottled int64
	ThrottledTime          Time
}

// initCFSBandwidth is init_cfs_bandwidth() for the root task group, at
// New.
func (k *Kernel) initCFSBandwidth() {
	k.cpuGroups = append(k.cpuGroups, cfsBandwidth{name: "/", parent: nilIdx, period: DefaultCFSPeriod, quota: RuntimeInf})
}

// NewCPUGroup creates a cpu group under parent (0 is the root task group),
// without a quota ("max") and with the default period.
func (k *Kernel) NewCPUGroup(parent int32, name string) int32 {
	k.cpuGroups = append(k.cpuGroups, cfsBandwidth{name: name, parent: parent, period: DefaultCFSPeriod,
		quota: RuntimeInf, expires: k.now})
	return int32(len(k.cpuGroups) - 1)
}

// CPUGroupCount is the number of cpu groups, the root included.
func (k *Kernel) CPUGroupCount() int { return len(k.cpuGroups) }

// CPUGroupName is cpu group g's path.
func (k *Kernel) CPUGroupName(g int32) string { return k.cpuGroups[g].name }

// CPUMax returns g's quota (RuntimeInf: none), period and burst.
func (k *Kernel) CPUMax(g int32) (quota, period, burst Time) {
	c := &k.cpuGroups[g]
	return c.quota, c.period, c.burst
}

// SetCPUMax is tg_set_cfs_bandwidth() as cpu.max ("quota period", with
// burst from cpu.max.burst) and cpu.cfs_quota_us, cpu.cfs_period_us and
// cpu.cfs_burst_us write it: the period within 1 ms..1 s, the quota
// RuntimeInf or at least 1 ms, the burst at most the quota (0 without a
// quota), and on cgroup v1 no group given more bandwidth (quota/period)
// than an ancestor (__cfs_schedulable). The runtime is refilled, every
// throttle ends, and the period timer starts.
func (k *Kernel) SetCPUMax(g int32, quota, period, burst Time) error {
	name := k.cpuGroups[g].name
	switch {
	case g == 0:
		return fmt.Errorf("cpu.max of %s: the root task group has no bandwidth to set", name)
	case period < minCFSQuotaPeriod || period > maxCFSQuotaPeriod:
		return fmt.Errorf("cpu.max of %s: period %v: allowed 1ms to 1s", name, time.Duration(period))
	case quota != RuntimeInf && (quota < minCFSQuotaPeriod || quota > maxCFSRuntime):
		return fmt.Errorf("cpu.max of %s: quota %v: allowed max or 1ms to %v", name, time.Duration(quota), time.Duration(maxCFSRuntime))
	case quota == RuntimeInf && burst != 0:
		return fmt.Errorf("cpu.max.burst of %s: burst %v: allowed 0 without a quota", name, time.Duration(burst))
	case burst < 0 || (quota != RuntimeInf && (burst > quota || burst+quota > maxCFSRuntime)):
		return fmt.Errorf("cpu.max.burst of %s: burst %v: allowed 0 to the quota %v", name, time.Duration(burst), time.Duration(quota))
	}
	if err := k.cfsSchedulable(g, quota, period); err != nil {
		return err
	}
	c := &k.cpuGroups[g]
	c.period, c.quota, c.burst = period, quota, burst
	if quota == RuntimeInf {
		c.runtime = 0
	} else {
		// The cfs_rqs' runtime_remaining is reset, which forgives an
		// overrun; then __refill_cfs_bandwidth_runtime().
		c.runtime = max(c.runtime, 0)
		c.runtime = min(c.runtime+quota, quota+burst)
		k.startCFSBandwidth(g)
	}
	if c.throttled {
		k.unthrottleCFS(g)
	}
	return nil
}

// toRatio is to_ratio(): quota per period in units of 1 >> BW_SHIFT.
func toRatio(period, quota Time) int64 {
	if quota == RuntimeInf {
		return -1
	}
	return int64(uint64(quota) << bwShift / uint64(period))
}

// cfsSchedulable is __cfs_schedulable() for giving g quota per period: on
// cgroup v1 (tg_cfs_schedulable_down) a group's bandwidth may not exceed
// its nearest limited ancestor's, checked for g and each of its
// descendants; on v2 a child's is only capped by its parent's.
func (k *Kernel) cfsSchedulable(g int32, quota, period Time) error {
	if k.cfg.CgroupVersion != 1 {
		return nil
	}
	ratio := func(x int32) int64 {
		if x == g {
			return toRatio(period, quota)
		}
		c := &k.cpuGroups[x]
		return toRatio(c.period, c.quota)
	}
	// hierarchical_quota of x: its own ratio, or its parent's when it
	// has none.
	var hq func(x int32) int64
	hq = func(x int32) int64 {
		if x <= 0 {
			return -1
		}
		if r := ratio(x); r >= 0 {
			return r
		}
		return hq(k.cpuGroups[x].parent)
	}
	for x := int32(1); x < int32(len(k.cpuGroups)); x++ {
		if x != g && !k.cpuAncestor(g, x) {
			continue
		}
		r, p := ratio(x), hq(k.cpuGroups[x].parent)
		if r >= 0 && p >= 0 && r > p {
			return fmt.Errorf("cpu.cfs_quota_us of %s: quota %v per %v gives %s more bandwidth than its parent: allowed at most the parent's share (cgroup v1)",
				k.cpuGroups[g].name, time.Duration(quota), time.Duration(period), k.cpuGroups[x].name)
		}
	}
	return nil
}

// cpuAncestor reports whether a is x or an ancestor of x.
func (k *Kernel) cpuAncestor(a, x int32) bool {
	for ; x != nilIdx; x = k.cpuGroups[x].parent {
		if x == a {
			return true
		}
	}
	return false
}

// CPUGroupOf is the cpu group t runs in.
func (k *Kernel) CPUGroupOf(t *Task) int32 { return t.cpu }

// MoveTask puts t in cpu group g, as writing its id to g's tasks file (v1)
// or cgroup.threads (v2) does. A task stopped on its old group's throttle
// runs again at once if g lets it.
func (k *Kernel) MoveTask(t *Task, g int32) {
	t.cpu = g
	if t.cpuWait != nilIdx {
		t.cpuWait = nilIdx
		k.wake(t)
	}
}

// CPUStat returns g's cpu.stat.
func (k *Kernel) CPUStat(g int32) CPUStat { return k.cpuGroups[g].stat }

// CPUThrottled reports whether g itself is throttled now.
func (k *Kernel) CPUThrottled(g int32) bool { return k.cpuGroups[g].throttled }

// accountCFSRuntime is account_cfs_rq_runtime() for d of CPU time a task
// of group g used, up the hierarchy: every group with a quota is charged,
// and one whose runtime runs out is throttled (throttle_cfs_rq).
func (k *Kernel) accountCFSRuntime(g int32, d Time, at Time) {
	for ; g > 0; g = k.cpuGroups[g].parent {
		c := &k.cpuGroups[g]
		c.stat.Usage += d
		if c.quota == RuntimeInf {
			continue
		}
		k.startCFSBandwidth(g)
		c.runtime -= d
		c.idle = false
		if c.runtime <= 0 && !c.throttled {
			c.throttled = true
			c.throttledClock = at
		}
	}
}

// cfsThrottledWait stops t at the start of a step if its group or an
// ancestor is throttled (a throttled cfs_rq's tasks are not picked), and
// reports whether it did.
func (k *Kernel) cfsThrottledWait(t *Task) bool {
	for g := t.cpu; g > 0; g = k.cpuGroups[g].parent {
		c := &k.cpuGroups[g]
		if c.throttled {
			t.cpuWait = g
			c.waiters = append(c.waiters, t.id)
			k.block(t, StopCPUThrottled)
			return true
		}
	}
	return false
}

// startCFSBandwidth is start_cfs_bandwidth(): arm the period timer, if it
// is not, at its next expiry after now (hrtimer_forward_now keeps the
// phase).
func (k *Kernel) startCFSBandwidth(g int32) {
	c := &k.cpuGroups[g]
	if c.periodActive {
		return
	}
	c.periodActive = true
	if c.expires <= k.now {
		c.expires += ((k.now-c.expires)/c.period + 1) * c.period
	}
	c.timerGen++
	k.heap.push(c.expires, evCFSPeriod, g, c.timerGen)
}

// cfsPeriodTimer is sched_cfs_period_timer() with
// do_sched_cfs_period_timer(): count the period, refill the runtime
// (__refill_cfs_bandwidth_runtime: quota more, at most quota + burst),
// and either stop (a period without use or throttling), or mark the
// coming period idle until used, or, if throttled, count it and
// unthrottle once the refill covers the overrun (distribute_cfs_runtime).
func (k *Kernel) cfsPeriodTimer(g int32) {
	c := &k.cpuGroups[g]
	if c.quota == RuntimeInf {
		c.periodActive = false
		return
	}
	c.expires += c.period
	throttled := c.throttled
	c.stat.NrPeriods++
	c.runtime = min(c.runtime+c.quota, c.quota+c.burst)
	switch {
	case c.idle && !throttled:
		c.periodActive = false
		return
	case !throttled:
		c.idle = true
	default:
		c.stat.NrThrottled++
		if c.runtime > 0 {
			k.unthrottleCFS(g)
		}
		c.idle = false
	}
	c.timerGen++
	k.heap.push(c.expires, evCFSPeriod, g, c.timerGen)
}

// unthrottleCFS is unthrottle_cfs_rq(): the throttled time is counted and
// the group's stopped tasks run again (each checks the rest of its
// hierarchy when it runs).
func (k *Kernel) unthrottleCFS(g int32) {
	c := &k.cpuGroups[g]
	c.throttled = false
	c.stat.ThrottledTime += max(k.now-c.throttledClock, 0)
	for _, id := range c.waiters {
		if t := k.tasks[id]; t.cpuWait == g {
			t.cpuWait = nilIdx
			k.wake(t)
		}
	}
	c.waiters = c.waiters[:0]
}
