package state

import (
	"slices"
	"strings"
	"time"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// Counters are what the daemon itself did to one cgroup, in the seeds'
// vocabulary where one exists. They only grow.
type Counters struct {
	// ReclaimedBytes is seed 001's kswapd_steal: bytes the daemon's
	// background reclaim took from the cgroup (the fall of its usage).
	ReclaimedBytes uint64
	// ReclaimRuns is seed 001's pgoutrun: background reclaim runs, each
	// from a wake-up below the low watermark to the high one.
	ReclaimRuns uint64
	// ReclaimOvershootBytes is how far past the high watermark the
	// background reclaim runs ended: at the end of each run, the free
	// space above high_wmark (policy.Decision.ReclaimOvershoot), summed.
	ReclaimOvershootBytes uint64
	// WriteOuts counts targeted write-outs of the cgroup's own files and
	// WriteOutBytes the dirty bytes it held when each began.
	WriteOuts, WriteOutBytes uint64
	// WriteOutsYielded counts the targeted write-outs that spaced their
	// chunks because another task was syncing on a device of the
	// cgroup's files (host.WriteOut.Yielded).
	WriteOutsYielded uint64
	// Flushes counts full flushes: seed 000's fallback, or the stock
	// behaviour when writeback_first is off. FlushBytes is the cgroup's
	// dirty bytes when each began (other cgroups' are not counted).
	Flushes, FlushBytes uint64
	// Pauses counts the throttle's freezes and Paused is their total
	// time: with pacing, the backstop's.
	Pauses uint64
	Paused time.Duration
	// Paces counts pacing episodes of the cgroup's dirtying tasks and
	// PacedTime their total time.
	Paces     uint64
	PacedTime time.Duration
	// PaceHeld is the time the paces' CPU bandwidth limits held the
	// paced tasks (host.PacedThrottled), read now and then while an
	// episode lasts and as it ends.
	PaceHeld time.Duration
	// OverLimit is the time dirty+writeback was above the dirty limit in
	// force (dirty_thresh), and OverLimitQuarter above 1.25 times it, as
	// the daemon's observations of the managed cgroup saw it: each
	// observation's level stands until the next, for at most an active
	// interval (the longest a cgroup over a threshold goes unobserved).
	OverLimit, OverLimitQuarter time.Duration
	// Errors counts actions that failed (other than a vanished cgroup).
	Errors uint64
	// FlushesRefused counts full flushes the host declined, which are
	// not failures: rate-limited host-wide (host.ErrRateLimited), or with
	// no filesystem to flush (host.ErrNothingToFlush).
	FlushesRefused uint64
}

// Status is the daemon's view of one managed cgroup.
type Status struct {
	Cgroup host.Cgroup
	// Observed is when Stat was read.
	Observed time.Time
	// Stat is the latest observation.
	Stat memcg.Stat
	// Effective are the settings in force.
	Effective memcg.Effective
	// Counters are the daemon's own.
	Counters Counters
	// Managed says whether the config manages the cgroup (under
	// manage.under and, with limited_only, limited); the daemon watches
	// every cgroup of its subtree but acts on, and exports, managed ones.
	// Unmanaged says why not, when not.
	Managed   bool
	Unmanaged string
	// Active says whether the cgroup is being worked on now (over a
	// threshold, reclaiming or throttled) rather than waiting for an event.
	Active bool
	// Exempt says why the daemon neither throttles nor reclaims the
	// cgroup (sched.HoldsMemcgd), "" when it does as the policy decides.
	Exempt string
	// Throttle says why the daemon cannot throttle the cgroup: Exempt, or
	// "throttle unavailable: <why>" when no freezer reaches it; "" when
	// it can.
	Throttle string
	// DirtyTracking is the dirty-tracking path in force: "tracker" (the
	// eBPF tracker wakes the daemon) or "poll" (the fallback's adaptive
	// interval).
	DirtyTracking string
	// State is what the daemon is doing to the cgroup now (StateIdle,
	// StateActive, StatePaced, StateThrottled, StateFrozen), "" before its first
	// step or when it is not managed; Since is when that began.
	State string
	Since time.Time
	// DryRun says the daemon runs dry (memcgd run --dry-run): the
	// counters and the state are what it would have done.
	DryRun bool
	// DirtyRate is the rate at which the cgroup's tasks dirty pages while
	// they run, and WriteBandwidth the rate at which its dirty pages are
	// written, as the throttle estimates them, in bytes per second.
	DirtyRate, WriteBandwidth uint64
}

// States of Status.State.
const (
	// StateIdle: under every threshold; the daemon waits for an event.
	StateIdle = "idle"
	// StateActive: over a threshold, writing out or reclaiming; looked
	// at every active interval at most.
	StateActive = "active"
	// StateThrottled: a throttle episode is open and the cgroup runs,
	// between freezes.
	StateThrottled = "throttled"
	// StatePaced: the cgroup's dirtying tasks run under a CPU bandwidth
	// limit.
	StatePaced = "paced"
	// StateFrozen: the cgroup is frozen by the throttle.
	StateFrozen = "frozen"
)

// Tracking paths of Status.DirtyTracking.
const (
	TrackingTracker = "tracker"
	TrackingPoll    = "poll"
)

// Fields is the status in `memcgd stat` form: the kernel's view from
// memcg.Report, with the daemon's own kswapd_steal and pgoutrun (which
// replace the kernel-derived stand-ins), its write-out and throttle
// counters (throttle_pauses and throttle_paused_us are the freezes: with
// pacing, the backstop's; throttle_paces and throttle_paced_us the pacing
// episodes) and the throttle's estimates of the dirtying rate and the
// write bandwidth.
func (s Status) Fields() []memcg.Field {
	c := s.Counters
	out := memcg.Report(s.Stat, s.Effective)
	for i := range out {
		if out[i].Name == "kswapd_steal" {
			out[i] = memcg.Field{Name: "kswapd_steal", Value: c.ReclaimedBytes / memcg.PageSize, Known: true, Kind: memcg.KindNumber}
		}
	}
	return append(out,
		memcg.Field{Name: "pgoutrun", Value: c.ReclaimRuns, Known: true},
		memcg.Field{Name: "reclaimed_bytes", Value: c.ReclaimedBytes, Known: true, Kind: memcg.KindBytes},
		memcg.Field{Name: "reclaim_overshoot_bytes", Value: c.ReclaimOvershootBytes, Known: true, Kind: memcg.KindBytes},
		memcg.Field{Name: "writeout_targeted", Value: c.WriteOuts, Known: true},
		memcg.Field{Name: "writeout_targeted_bytes", Value: c.WriteOutBytes, Known: true, Kind: memcg.KindBytes},
		memcg.Field{Name: "writeout_targeted_yielded", Value: c.WriteOutsYielded, Known: true},
		memcg.Field{Name: "writeout_flush", Value: c.Flushes, Known: true},
		memcg.Field{Name: "writeout_flush_bytes", Value: c.FlushBytes, Known: true, Kind: memcg.KindBytes},
		memcg.Field{Name: "throttle_pauses", Value: c.Pauses, Known: true},
		memcg.Field{Name: "throttle_paused_us", Value: uint64(c.Paused / time.Microsecond), Known: true},
		memcg.Field{Name: "throttle_paces", Value: c.Paces, Known: true},
		memcg.Field{Name: "throttle_paced_us", Value: uint64(c.PacedTime / time.Microsecond), Known: true},
		memcg.Field{Name: "throttle_pace_held_us", Value: uint64(c.PaceHeld / time.Microsecond), Known: true},
		memcg.Field{Name: "dirty_over_thresh_us", Value: uint64(c.OverLimit / time.Microsecond), Known: true},
		memcg.Field{Name: "dirty_over_thresh_quarter_us", Value: uint64(c.OverLimitQuarter / time.Microsecond), Known: true},
		memcg.Field{Name: "dirty_rate_bytes_per_second", Value: s.DirtyRate, Known: true},
		memcg.Field{Name: "write_bandwidth_bytes_per_second", Value: s.WriteBandwidth, Known: true},
		memcg.Field{Name: "writeout_flush_refused", Value: c.FlushesRefused, Known: true},
		memcg.Field{Name: "throttle_available", Value: memcg.Flag(s.Throttle == ""), Known: true, Kind: memcg.KindFlag},
		memcg.Field{Name: "exempt", Value: memcg.Flag(s.Exempt != ""), Known: true, Kind: memcg.KindFlag},
		memcg.Field{Name: "dirty_tracker", Value: memcg.Flag(s.DirtyTracking == TrackingTracker), Known: s.DirtyTracking != "", Kind: memcg.KindFlag},
	)
}

// Sort orders statuses by cgroup path, parents first.
func Sort(s []Status) {
	slices.SortFunc(s, func(a, b Status) int { return strings.Compare(string(a.Cgroup), string(b.Cgroup)) })
}
