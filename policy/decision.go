// Package policy is memcgd's three controllers as a pure state machine:
// per cgroup, an observation goes in and a decision comes out (write out
// the cgroup's files, flush everything, reclaim N bytes, pace the
// dirtying tasks, freeze or thaw the cgroup, when to look again and at
// which thresholds to be woken), with no files, clocks or goroutines. A
// Decision holds everything the driver must do for the cgroup; the
// scheduler (package sched) carries it out on a host.Host, the real
// kernel or the simulator.
package policy

import (
	"strings"
	"time"
)

// Reason says why a decision was taken; several may hold at once.
type Reason uint8

const (
	// ReasonBackground: dirty pages past dirty_background (seed 004).
	ReasonBackground Reason = 1 << iota
	// ReasonThrottle: dirty and writeback pages past the freerun ceiling
	// (seed 004, balance_dirty_pages), or a throttle in progress.
	ReasonThrottle
	// ReasonWatermark: free below the low watermark, and still below the
	// high one (seed 001).
	ReasonWatermark
	// ReasonReclaimWriteback: reclaim needs the cgroup's dirty pages
	// written (seed 000).
	ReasonReclaimWriteback
)

func (r Reason) String() string {
	var parts []string
	for _, x := range []struct {
		r Reason
		s string
	}{{ReasonBackground, "background"}, {ReasonThrottle, "throttle"}, {ReasonWatermark, "watermark"}, {ReasonReclaimWriteback, "reclaim-writeback"}} {
		if r&x.r != 0 {
			parts = append(parts, x.s)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// Throttle is what the closed-loop throttle asks of the freezer now
// (Input.Freezer == FreezerHeld). The driver keeps no throttle state of
// its own beyond carrying these out.
type Throttle uint8

const (
	// ThrottleNone: leave the freezer alone (the cgroup is not frozen).
	ThrottleNone Throttle = iota
	// ThrottleFreeze: freeze the cgroup now and keep it frozen.
	ThrottleFreeze
	// ThrottleHold: the cgroup is frozen; keep it frozen. HoldFor bounds
	// how long without a new decision.
	ThrottleHold
	// ThrottleThaw: thaw the cgroup now. The episode may stay open
	// (Episode) for a refreeze.
	ThrottleThaw
)

func (t Throttle) String() string {
	switch t {
	case ThrottleNone:
		return "none"
	case ThrottleFreeze:
		return "freeze"
	case ThrottleHold:
		return "hold"
	case ThrottleThaw:
		return "thaw"
	}
	return "throttle(?)"
}

// Wake are the thresholds at which the driver's watcher must report the
// cgroup, so that the policy need not poll it: the whole watch, which
// the driver arms whenever it differs from the one armed. memcg.NoLimit
// never reports. An active cgroup is looked at anyway (NextLook), so its
// usage watch is off (UsageAbove is memcg.NoLimit): on v1 each arming is
// a cgroup.event_control registration that ends in synchronize_rcu()
// (mm/memcontrol-v1.c, __mem_cgroup_usage_register_event), too dear to
// repeat every millisecond, while a tracker's threshold is a map update.
type Wake struct {
	// UsageAbove reports the cgroup once its usage (memory.current,
	// memory.usage_in_bytes) rises above this many bytes: before it can
	// reach its dirty background threshold by charging new pages, or its
	// low watermark.
	UsageAbove uint64
	// OnlyArmed keeps the watcher from reporting the cgroup at reclaim, a
	// memory stall or a memory.events change in it: set while it is
	// active, as it is looked at anyway (host.Wake).
	OnlyArmed bool
	// DirtiedAbove reports the cgroup once the tracker's dirtied-bytes
	// counter (Input.Stat.Counters.DirtiedBytes, re-dirtied cached pages
	// included) passes this absolute value. memcg.NoLimit without
	// Input.Tracker.
	DirtiedAbove uint64
	// LevelAbove and LevelBelow report the cgroup once its dirty+writeback
	// rises above or falls below these bytes (the tracker's level,
	// Input.LevelWakes): a paced cgroup is then looked at when its pace
	// must change, not polled. memcg.NoLimit and 0 are off.
	LevelAbove, LevelBelow uint64
}

// Decision is what to do for one cgroup now and when to look again. The
// driver carries out the throttle first, the pace then the freezer: a
// pace, a freeze or a thaw is due now,
// while a write-out or a v1 reclaim step can take tens of milliseconds,
// and neither needs the tasks running. Then the write-out or flush, so
// that reclaim finds clean pages, then reclaim; then it arms Wake and
// schedules NextLook. Each decision replaces every deadline
// of the previous one (NextLook, HoldFor, RunFor). The controller mirrors
// the freezer from its decisions and their deadlines, as if the driver
// carried them out exactly; Input.Frozen corrects it where not.
type Decision struct {
	// WriteOut starts write-out of the cgroup's own files.
	WriteOut bool
	// Flush starts write-out of everything on the filesystems the cgroup
	// writes to: the stock kernel's behaviour, and seed 000's fallback.
	Flush bool
	// Reclaim is the bytes to reclaim in the background.
	Reclaim uint64
	// ReclaimStart says this step starts a background reclaim run (seed
	// 001's kswapd wakes): the driver counts runs by it and keeps no
	// kswapd state of its own.
	ReclaimStart bool
	// ReclaimOvershoot, at the step that ends a background reclaim run
	// (free back at high_wmark), is how far free is past high_wmark: what
	// the run reclaimed past it, which the driver adds to the cgroup's
	// counter. Zero otherwise.
	ReclaimOvershoot uint64

	// Throttle is the closed-loop throttle's freezer action, with
	// Input.Freezer == FreezerHeld; ThrottleNone otherwise.
	Throttle Throttle
	// HoldFor, with ThrottleFreeze or ThrottleHold, is the longest the
	// cgroup may stay frozen from now without a new decision: what is
	// left of MaxPause since the freeze, and, once the device has been
	// measured, no longer than it should take to drain the cgroup to the
	// thaw level. The driver thaws on its own when it passes (a late step
	// must not extend a pause), then, if RunFor is set, freezes the
	// cgroup again RunFor later, and steps it at each.
	HoldFor time.Duration
	// Episode says a throttle episode is open: from a ThrottleFreeze
	// until the cgroup has stayed thawed for EpisodeLinger below the
	// freeze level. Freezes and thaws within it are one episode (one
	// journal record); the first decision with Episode false after true
	// ends it. The cgroup is never frozen when Episode is false.
	Episode bool
	// RunFor is how long the cgroup may run before the driver freezes it
	// again on its own, unless a newer decision comes first: counted from
	// this observation when the decision leaves it thawed inside an
	// episode (ThrottleThaw, or ThrottleNone with Episode), from the end
	// of HoldFor when it is frozen (ThrottleFreeze, ThrottleHold). Such a
	// freeze is a refreeze within the episode, lasts at most MaxPause
	// without a newer decision, and the driver steps the cgroup when it
	// makes it. It is the time the cgroup takes to dirty its way to the
	// freeze level at its recent rate; a timer in the driver keeps the
	// run short however slow the driver's reaction. 0: no deadline.
	RunFor time.Duration
	// Pace is the CPU bandwidth the cgroup's dirtying tasks may use, with
	// Input.Pacer; the zero Pacing releases them.
	Pace Pacing
	// PaceRefill asks for Pace, the pace in force, to be written again:
	// the write refills the group's quota where its period timer would
	// not yet (Controller.staleTimer).
	PaceRefill bool

	// Paused, with ThrottleThaw, is how long the cgroup was frozen, by
	// the observations' clock (from the freeze, or the driver's refreeze
	// at RunFor): the measured drain, at most MaxPause.
	Paused time.Duration

	// Active says the controller is working on the cgroup (a throttle
	// episode, reclaim, write-out, dirty past the background threshold,
	// or dirtying fast enough to be polled): the status shows it.
	Active bool
	// NextLook is when to step the cgroup again, counted from this
	// observation, whether or not a watch reports it; 0 means only when
	// the watcher reports it (or the driver's slow safety scan).
	NextLook time.Duration
	// Wake are the watcher's thresholds.
	Wake Wake

	// Why records the reasons.
	Why Reason
}

// Idle reports whether the decision does nothing now: no write-out,
// flush, reclaim or freezer action (ThrottleHold is an action: the
// cgroup stays frozen).
func (d Decision) Idle() bool {
	return !d.WriteOut && !d.Flush && d.Reclaim == 0 && d.Throttle == ThrottleNone
}
