package sched

import (
	"time"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// Kind is what an Op asks the driver to do.
type Kind uint8

// The kinds of Op, each one host call (or a few, for Observe and Forget).
const (
	// List lists the managed subtree (host.Host.Cgroups).
	List Kind = iota + 1
	// Observe reads Read, the cgroup's own path last, and with Dirtied
	// its dirtied-bytes counter (host.DirtyCounter).
	Observe
	// Refresh reads one ancestor's state off the steps, to renew the
	// reading the steps of its descendants reuse.
	Refresh
	// Freeze begins a throttle episode (host.Freezer.Freeze); the result
	// carries its host.Frozen.
	Freeze
	// Thaw, Refreeze and End act on the episode Episode holds.
	Thaw
	Refreeze
	End
	// Pace begins a pacing episode of the cgroup's dirtying tasks
	// (host.Pacer.Pace) at Pace; the result carries its host.Paced.
	// SetPace changes the pace of the episode Paced holds, Unpace ends
	// it.
	Pace
	SetPace
	Unpace
	// WriteOut, Flush and Reclaim are the policy's actions
	// (host.Host.WriteOut, Flush, Reclaim of Bytes).
	WriteOut
	Flush
	Reclaim
	// Watch arms Wake on the cgroup (host.Watcher.Watch).
	Watch
	// Forget drops what the driver keeps of a cgroup it stops managing:
	// its watch (host.Watcher.Unwatch), the host's resources
	// (host.Forgetter) and its runtime overrides.
	Forget
)

var kindNames = [...]string{List: "list", Observe: "observe", Refresh: "refresh", Freeze: "freeze", Thaw: "thaw",
	Refreeze: "refreeze", End: "end", Pace: "pace", SetPace: "set pace", Unpace: "unpace", WriteOut: "write out", Flush: "flush", Reclaim: "reclaim", Watch: "watch", Forget: "forget"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "op(?)"
}

// Lane is the pool an op runs on. Ops of one lane run in the order Ready
// hands them out, at most Capacity of them at once; the Core never has
// more in flight on a lane, so a driver with that many workers per lane
// never queues.
type Lane uint8

const (
	// Fast: short reads and single cgroupfs writes the throttle waits
	// for (List, Observe, Refresh, the freezer).
	Fast Lane = iota
	// Slow: actions that wait for the kernel's work (write-out, flush,
	// reclaim), tens of milliseconds or more.
	Slow
	// Serial: the watcher's arming and the forgetting of a cgroup, one at
	// a time and in order, so that a cgroup's watch is never armed after
	// it was forgotten. A v1 usage threshold's registration waits for
	// synchronize_rcu() (mm/memcontrol-v1.c), which must hold up neither
	// the steps nor the throttle.
	Serial
	// LaneCount is the number of lanes.
	LaneCount
)

// Lane is the lane an op of kind k runs on.
func (k Kind) Lane() Lane {
	switch k {
	case WriteOut, Flush, Reclaim:
		return Slow
	case Watch, Forget:
		return Serial
	}
	return Fast
}

// Op is one thing the driver must do and report on (Core.Advance).
type Op struct {
	// ID identifies the op in its Result.
	ID   uint64
	Kind Kind
	// Cgroup is the cgroup it acts on; "" for List.
	Cgroup host.Cgroup
	// Read are the paths Observe reads, root first, Cgroup last.
	Read []host.Cgroup
	// Dirtied asks Observe for the cgroup's dirtied-bytes counter too.
	Dirtied bool
	// Held asks Observe for the time Paced's limit has held its tasks
	// too (host.PacedThrottled).
	Held bool
	// Bytes is what Reclaim asks for, and Usage the cgroup's usage in
	// the observation it was decided on (host.Host.Reclaim); for
	// WriteOut, Bytes is the cgroup's dirty bytes in that observation
	// (host.Host.WriteOut).
	Bytes, Usage uint64
	// Wake is what Watch arms.
	Wake host.Wake
	// Episode is the throttle episode Thaw, Refreeze and End act on:
	// what Freeze returned, opaque to the Core.
	Episode host.Frozen
	// Quota and Period are what Pace and SetPace set.
	Quota, Period time.Duration
	// Paced is the pacing episode SetPace and Unpace act on, and whose
	// CPU time Observe reads: what Pace returned.
	Paced host.Paced
}

// Result is how an op went, for Core.Advance.
type Result struct {
	// Op is the op, as Ready handed it out.
	Op Op
	// At is when the op completed, by the host's clock; for Observe,
	// when the cgroup was read.
	At time.Time
	// Took is how long the host call took, for the slow-call log.
	Took time.Duration
	// Err is the op's error; one that wraps host.ErrVanished means the
	// cgroup is gone.
	Err error

	// Cgroups are what List found, parents before children.
	Cgroups []host.Cgroup
	// Stats are what Observe or Refresh read, one per Op.Read (Refresh:
	// one); on error, those read before it.
	Stats []memcg.Stat
	// Dirtied are the dirtied-bytes counters Observe read, when
	// HasDirtied; DirtiedErr why it has none when Op.Dirtied asked.
	Dirtied    host.DirtyCounts
	HasDirtied bool
	DirtiedErr error
	// Episode is what Freeze began, Paced what Pace began.
	Episode host.Frozen
	Paced   host.Paced
	// PacedCPU is the CPU time the paced tasks used, which Observe read
	// from Op.Paced; Unpaced the threads dirtying unpaced, when
	// UnpacedKnown (host.PacedEscapes).
	PacedCPU     time.Duration
	Unpaced      int
	UnpacedKnown bool
	// PacedThrottled is the time the episode's limit has held its
	// tasks, which Observe read from Op.Paced when Op.Held asked, and
	// Unpace before ending it (host.PacedThrottled).
	PacedThrottled time.Duration
	// WriteOut is what WriteOut did.
	WriteOut host.WriteOut
	// Reclaimed is the fall of usage Reclaim achieved.
	Reclaimed uint64
}
