package host

import (
	"context"
	"time"
)

// DirtyPath says how a host learns that a cgroup dirtied pages: through a
// fast tracker that reports a cgroup as soon as it passes
// Wake.DirtiedAbove (the eBPF tracker), or by being polled.
type DirtyPath struct {
	// Tracker is true when the fast tracker is in force: Dirtied is its
	// monotonic per-cgroup counter and Watchers honour Wake.DirtiedAbove.
	Tracker bool
	// Levels is true when the tracker also counts each cgroup's
	// dirty+writeback in the kernel and Watchers honour Wake.LevelAbove
	// and LevelBelow.
	Levels bool
	// Reason says why the host polls, when Tracker is false: the
	// tracker's load error, or that it was disabled.
	Reason string
}

// String returns "tracker" or "poll (REASON)".
func (p DirtyPath) String() string {
	if p.Tracker {
		return "tracker"
	}
	if p.Reason == "" {
		return "poll"
	}
	return "poll (" + p.Reason + ")"
}

// FastPath is a host that says which dirty-tracking path is in force and
// whether it can throttle a cgroup.
type FastPath interface {
	// DirtyPath says which dirty-tracking path is in force. It does not
	// change over the host's life.
	DirtyPath() DirtyPath
	// ThrottleUnavailable returns why cg cannot be throttled, as found
	// by its last Freeze ("no freezer: ..."), or "" when it
	// can be or has not been tried.
	ThrottleUnavailable(cg Cgroup) string
}

// Frozen is one throttle episode of a cgroup, begun by Freezer.Freeze:
// the cgroup stays frozen across the caller's steps until Thaw or End.
type Frozen interface {
	// Thaw lets the cgroup's tasks run again within the episode.
	Thaw() error
	// Refreeze stops them again within the episode.
	Refreeze() error
	// End ends the episode and leaves the cgroup thawed. Calls after the
	// first do nothing.
	End() error
}

// Freezer is a host that can hold a cgroup frozen across steps: the
// closed-loop throttle (policy.FreezerHeld), and the pace's backstop. A
// host without it cannot stop a cgroup's tasks.
type Freezer interface {
	// Freeze freezes cg and begins an episode. The episode ends, and cg
	// is thawed, when ctx ends, if End was not called before. An error
	// that wraps errors.ErrUnsupported means the cgroup cannot be
	// frozen here (ThrottleUnavailable says why).
	Freeze(ctx context.Context, cg Cgroup) (Frozen, error)
}

// Paced is one pacing episode of a cgroup's dirtying tasks, begun by
// Pacer.Pace: they run under a CPU bandwidth limit until End, and no
// other task of the cgroup does.
type Paced interface {
	// Set changes the limit to quota of CPU time per period (a quota of
	// 0: no limit, the tasks kept in the episode), and paces too the
	// cgroup's tasks that began dirtying since the last call.
	Set(quota, period time.Duration) error
	// CPU is the CPU time the paced tasks have used within the episode.
	CPU() (time.Duration, error)
	// End releases the tasks, restores what the episode changed and ends
	// it. Calls after the first do nothing.
	End() error
}

// PacedThrottled is a Paced episode that can tell how long its limit has
// held its tasks.
type PacedThrottled interface {
	// Throttled is the time the episode's CPU bandwidth limit has held
	// its tasks since it began: its groups' throttled time (cpu.stat
	// throttled_time on v1, throttled_usec on v2; kernel/sched/fair.c,
	// unthrottle_cfs_rq), summed over the CPUs they were held on.
	Throttled() (time.Duration, error)
}

// PacedEscapes is a Paced episode that can tell whether every thread
// dirtying its cgroup's pages is paced: its host names the dirtying
// threads (the eBPF tracker).
type PacedEscapes interface {
	// Unpaced counts the cgroup's threads that dirty its pages now and
	// that the episode does not pace (it could not, or has not yet); ok
	// is false when it cannot tell.
	Unpaced() (n int, ok bool)
}

// Pacer is a host that can pace a cgroup's dirtying tasks by CPU
// bandwidth (policy.Input.Pacer): no signal is sent and no syscall cut
// short, a paced task runs later. An error that wraps
// errors.ErrUnsupported means it cannot pace this cgroup (the hierarchy
// does not allow it); the freezer then throttles it.
type Pacer interface {
	// Pace begins an episode with quota per period. The episode ends,
	// and the tasks are released, when ctx ends if End was not called.
	Pace(ctx context.Context, cg Cgroup, quota, period time.Duration) (Paced, error)
}

// CgroupEvent reports a cgroup created or removed in the managed subtree.
type CgroupEvent struct {
	// Cgroup is the cgroup created or removed; for a Rescan, the managed
	// subtree.
	Cgroup Cgroup
	// Removed: the cgroup was removed; otherwise it was created.
	Removed bool
	// Rescan: reports were lost; the receiver must list the subtree again.
	Rescan bool
}

// CgroupNotifier is a host that reports new and removed cgroups as they
// come and go, so that a new cgroup is managed within milliseconds rather
// than at the next periodic scan.
type CgroupNotifier interface {
	// CgroupEvents starts the reports and returns their channel, which
	// is closed when ctx ends. It may be called once.
	CgroupEvents(ctx context.Context) (<-chan CgroupEvent, error)
}

// Forgetter is a host that keeps resources per cgroup of its own making
// (the real kernel's: the tracker's id and count for the cgroup, freezer
// cgroups made for it). The driver calls Forget once when it stops
// managing a cgroup (it was removed): the host never drops them by
// itself, so that one owner decides a cgroup's lifetime.
type Forgetter interface {
	// Forget drops what the host holds for cg. A cgroup that still
	// exists is looked up afresh at its next use.
	Forget(cg Cgroup)
}
