// Package host defines what memcgd's policy needs from a kernel: observe a
// memory cgroup and act on it. The real cgroupfs (package cgroupfs) and the
// simulated kernel both implement Host, so the same decisions run on both.
package host

import (
	"context"
	"errors"
	"time"

	"github.com/memcgd/memcgd/memcg"
)

// ErrVanished reports that a cgroup was removed between listing and acting.
// Callers skip the cgroup; it is never fatal.
var ErrVanished = errors.New("cgroup vanished")

// ErrNothingReclaimed reports that a reclaim request freed nothing: what
// the cgroup holds is unreclaimable for now (anonymous memory without
// swap, dirty or locked pages). It is a shortfall, not a failure.
var ErrNothingReclaimed = errors.New("nothing reclaimed")

// ErrRateLimited reports an action refused by a host-wide rate limit, such
// as that on full flushes: the action is not needed more often than the
// limit allows, and asking again later is the remedy. It is not a failure.
var ErrRateLimited = errors.New("rate-limited")

// ErrNothingToFlush reports a flush that found no filesystem to flush:
// the cgroup's tasks hold no file open for writing on one that may be
// flushed. A host never falls back to flushing every filesystem. It is
// not a failure.
var ErrNothingToFlush = errors.New("nothing to flush")

// Cgroup names a memory cgroup by its path in the hierarchy, as it appears
// in /proc/PID/cgroup ("/" is the root, "/a/b" a descendant).
type Cgroup string

// WriteOut reports what a targeted write-out did.
type WriteOut struct {
	// Files is how many distinct files were started.
	Files int
	// Bytes is an upper bound on what was queued for I/O: the dirty
	// bytes WriteOut was given, the cgroup's when the write-out was
	// decided, or, from a host that counts what it queues (the
	// simulator's), that count.
	Bytes uint64
	// Yielded says the write-out spaced its chunks because another task
	// was syncing on a device of its files.
	Yielded bool
}

// Host is a kernel as memcgd's policy sees it.
type Host interface {
	// Cgroups lists the memory cgroups in the managed subtree, parents
	// before children.
	Cgroups(ctx context.Context) ([]Cgroup, error)
	// Observe reads one cgroup's state.
	Observe(ctx context.Context, cg Cgroup) (memcg.Stat, error)
	// Reclaim asks the kernel to reclaim up to n bytes from cg and returns
	// how much usage fell. usage, if not 0, is cg's usage in the
	// observation n was decided on: the reclaim then stops at usage - n,
	// so that what the cgroup gave back by itself meanwhile (its tasks'
	// own reclaim at the limit, an exited task) counts toward n.
	Reclaim(ctx context.Context, cg Cgroup, n, usage uint64) (uint64, error)
	// WriteOut starts write-out of the dirty pages of cg's own files, and of
	// no other cgroup's files unless they are shared. dirty is cg's dirty
	// page cache as the caller last observed it (memcg.Stat.Dirty): it
	// bounds how far before each file's end a write-out looks.
	WriteOut(ctx context.Context, cg Cgroup, dirty uint64) (WriteOut, error)
	// Flush starts write-out of every dirty page on the filesystems cg
	// writes to: the kernel's behaviour, and seed 000's fallback. It may
	// refuse with ErrRateLimited or ErrNothingToFlush.
	Flush(ctx context.Context, cg Cgroup) error
	// Now is the host's clock.
	Now() time.Time
}

// DirtyCounter is a Host that can tell how many bytes of page cache a
// cgroup's tasks have dirtied: what the throttle must pace and what charges
// new pages. The agent asks it for the cgroup it steps, not its ancestors.
type DirtyCounter interface {
	DirtyCounts(ctx context.Context, cg Cgroup) (DirtyCounts, error)
}

// DirtyCounts are what a DirtyCounter counts of a cgroup's page cache.
type DirtyCounts struct {
	// Dirtied is the bytes the cgroup's tasks have dirtied.
	Dirtied uint64
	// Cancelled is the bytes of the cgroup's dirty pages dropped
	// unwritten, a truncated or deleted file's, counted like Dirtied;
	// known when HasCancelled. Without it such a fall of dirty+writeback
	// reads as pages written.
	HasCancelled bool
	Cancelled    uint64
}
