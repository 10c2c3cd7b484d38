package policy

import (
	"time"

	"github.com/memcgd/memcgd/memcg"
)

// Freezer says how the driver can stop a cgroup's tasks.
type Freezer uint8

const (
	// FreezerNone: nothing can stop the cgroup's tasks (a v1 cgroup with
	// no freezer, or one that holds the daemon). The policy still writes
	// out and reclaims; Why says ReasonThrottle where a throttle was due.
	// The zero value: a driver that says nothing stops nothing.
	FreezerNone Freezer = iota
	// FreezerHeld: the driver can freeze the cgroup, keep it frozen
	// across steps and thaw it when told (Decision.Throttle): the
	// closed-loop throttle.
	FreezerHeld
)

// Input is one observation of a cgroup with its effective settings and
// what the driver can do.
type Input struct {
	// Now is the time of the observation, from the host's clock.
	Now time.Time
	// Stat is the cgroup's state.
	Stat memcg.Stat
	// Dirty are its effective dirty thresholds (memcg.EffectiveDirtyLimits).
	Dirty memcg.DirtyLimits
	// Watermarks are its reclaim watermarks (memcg.Knobs.Watermarks).
	Watermarks memcg.Watermarks
	// WritebackFirst is seed 000's switch.
	WritebackFirst bool
	// Exempt says the cgroup holds the daemon itself (Exempt): it is
	// written out and flushed, but never throttled nor reclaimed.
	Exempt bool

	// Tracker says a fast dirty tracker is in force for the cgroup and
	// Stat.Counters holds its dirtied-bytes counter: the watcher reports
	// the cgroup once the counter passes Decision.Wake.DirtiedAbove, so
	// a dirtying cgroup need not be polled. Without it (the fallback)
	// the policy polls a dirtying cgroup at an interval derived from its
	// dirtying rate (Decision.NextLook).
	Tracker bool
	// Reaction is the driver's reaction delay: from a report by the
	// watcher, or NextLook passing, to the step it triggers (queueing,
	// reading the cgroup). It is thus also the least time from one step
	// to the next. The policy anticipates it: it freezes a cgroup that
	// would pass the limit within Reaction at its recent dirtying rate,
	// thaws one the device would bring to freerun within Reaction, arms
	// the tracker that much early, and keeps free memory for the growth
	// over it (with ActiveInterval). Zero is the kernel's behaviour.
	Reaction time.Duration
	// ActiveInterval is the longest the driver wants between two looks
	// at an active cgroup (the agent's --active-interval): the ceiling of
	// NextLook for an active cgroup, and with Reaction the horizon over
	// which the userspace kswapd anticipates growth. Zero means
	// DefaultActiveInterval for NextLook and no horizon for kswapd.
	ActiveInterval time.Duration
	// ReclaimStep bounds the bytes one decision reclaims, so that one
	// cgroup's reclaim cannot hold the driver while others wait
	// (DefaultReclaimStep if zero).
	ReclaimStep uint64
	// Freezer says how the driver can stop the cgroup's tasks.
	Freezer Freezer
	// LevelWakes says the watcher reports dirty+writeback crossing
	// Wake.LevelAbove and LevelBelow (the tracker counts it in the
	// kernel): a paced cgroup is looked at every PaceLevelLook, and
	// between by those reports.
	LevelWakes bool
	// Pacer says the driver can pace the cgroup's dirtying tasks by CPU
	// bandwidth (pace.go): the throttle paces them, and the freezer is
	// only its backstop. Paced is the pace in force as the driver holds
	// it.
	Pacer bool
	Paced Pacing
	// PacedCPU is the CPU time the paced tasks have used in the pace's
	// episode, read with the observation; zero where the driver did not
	// read it.
	PacedCPU time.Duration
	// Unpaced, when UnpacedKnown, counts the cgroup's threads that dirty
	// its pages now and that the driver does not pace (it names the
	// dirtying threads: the eBPF tracker). The backstop then freezes only
	// for those: a paced task's burst past its quota is the pace's
	// resolution, which a freeze would buy with the tenant's short reads.
	Unpaced      int
	UnpacedKnown bool
	// PacePeriodCap is the longest CFS period a pace may have (PaceFor);
	// 0 is MaxPacePeriod. The driver sets it short on kernels before the
	// task-based throttle (6.18), where a paced task can be descheduled
	// holding a lock others wait for.
	PacePeriodCap time.Duration
	// PacedBelow says the dirtying tasks of a cgroup beneath this one
	// are paced. The cgroup is then not frozen: that would stop them
	// with the rest, which the pace exists to avoid; what dirties past
	// their pace, their own backstop holds.
	PacedBelow bool
	// Frozen is whether the driver holds the cgroup frozen as it is
	// observed (FreezerHeld only). The controller mirrors the driver
	// from its own decisions and deadlines; where they disagree (a
	// freeze that failed, a thaw on error) it takes the driver's word.
	Frozen bool
}

// DefaultReclaimStep is Input.ReclaimStep's default.
const DefaultReclaimStep = 8 << 20

// activeInterval is ActiveInterval, or its default.
func (in Input) activeInterval() time.Duration {
	if in.ActiveInterval > 0 {
		return in.ActiveInterval
	}
	return DefaultActiveInterval
}

// reclaimStep is ReclaimStep, or its default.
func (in Input) reclaimStep() uint64 {
	if in.ReclaimStep > 0 {
		return in.ReclaimStep
	}
	return DefaultReclaimStep
}

// horizon is how far ahead the userspace kswapd must keep free memory:
// the longest an active cgroup goes unobserved plus the reaction delay.
func (in Input) horizon() time.Duration {
	return in.Reaction + in.ActiveInterval
}

// backgroundReclaim reports whether the userspace kswapd (kswapd.go) works
// for the cgroup: its watermarks are set, it has a limit, and it does not
// hold the daemon. A cgroup that holds the daemon is left to the kernel's
// own reclaim: a v1 reclaim squeezes the hierarchical limit the daemon is
// charged under, so that its own allocations could fail or OOM in the
// window; a v2 memory.reclaim runs in the daemon's own write and takes
// from the daemon's pages too, as long as the kernel needs to find them.
func (in Input) backgroundReclaim() bool {
	return !in.Exempt && in.Watermarks.Enabled() && in.Stat.Limit != memcg.NoLimit
}

// freezer is how the policy may stop the cgroup's tasks: never when it
// holds the daemon.
func (in Input) freezer() Freezer {
	if in.Exempt {
		return FreezerNone
	}
	return in.Freezer
}
