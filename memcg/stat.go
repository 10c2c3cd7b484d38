// Package memcg holds the domain of memcgd: a memory cgroup's observed state,
// its per-cgroup knobs (the seeds' dirty limits, reclaim watermarks and
// writeback-first switch), sizes as the kernel parses them, and the
// threshold and watermark arithmetic the kernel would have done had the
// seed patch sets been merged. It is pure: no files, no clocks.
package memcg

import "math"

// NoLimit is the limit of a cgroup that has none (v2 "max", v1's
// PAGE_COUNTER_MAX rounded to pages).
const NoLimit uint64 = math.MaxUint64

// PageSize is the page size memcgd assumes when it converts the seeds'
// page counts (MIN_WB_DIRTY_PAGES, DIRTY_POLL_THRESH) to bytes.
const PageSize = 4096

// Stat is one observation of a memory cgroup. Sizes are in bytes, counters
// are event counts as the kernel reports them. A counter the kernel does
// not expose for this hierarchy version is left zero and its Has flag
// false, so callers can print n/a instead of a made-up zero.
type Stat struct {
	// Usage is memory.current (v2) or memory.usage_in_bytes (v1).
	Usage uint64
	// Limit is the effective hard ceiling: min(memory.max, memory.high) on
	// v2, memory.limit_in_bytes on v1; NoLimit when there is none.
	Limit uint64
	// Max and High are v2's memory.max and memory.high (NoLimit if "max");
	// on v1 Max equals Limit and High is NoLimit.
	Max, High uint64

	// File is the page cache charged to the cgroup (v2 file, v1 cache);
	// ActiveFile and InactiveFile are its two LRU lists.
	File, ActiveFile, InactiveFile uint64
	// Anon is anonymous memory (v2 anon, v1 rss).
	Anon uint64
	// Dirty and Writeback are v2 file_dirty/file_writeback, v1 dirty/writeback.
	Dirty, Writeback uint64

	// Counters holds the kernel's reclaim and event counters.
	Counters Counters
	// Pressure is the cgroup's memory PSI, when the host has it.
	Pressure Pressure
}

// Counters are the kernel's cumulative counters for one cgroup. The Has*
// flags say whether this kernel exposes the group at all.
type Counters struct {
	HasReclaim                   bool // v2 memory.stat pgscan_*/pgsteal_*
	PgscanKswapd, PgscanDirect   uint64
	PgstealKswapd, PgstealDirect uint64
	Pgrefill                     uint64

	HasPgpg         bool // v1 memory.stat pgpgin/pgpgout (pages)
	Pgpgin, Pgpgout uint64

	HasEvents                                                  bool // v2 memory.events
	EventsLow, EventsHigh, EventsMax, EventsOOM, EventsOOMKill uint64

	HasFailcnt bool // v1 memory.failcnt
	Failcnt    uint64

	// HasWritten says whether WrittenBytes is known: the bytes of
	// writeback I/O issued on behalf of the cgroup (v2 io.stat wbytes,
	// which cgroup writeback attributes to the dirtying cgroup). v1 cannot
	// attribute buffered writeback and leaves it unknown.
	HasWritten   bool
	WrittenBytes uint64

	// HasDirtied says whether DirtiedBytes is known: the bytes of page
	// cache the cgroup's current tasks have dirtied over their lives
	// (/proc/PID/io write_bytes). It falls when a task leaves; only its
	// increases mean anything.
	HasDirtied   bool
	DirtiedBytes uint64

	// HasCancelled says whether CancelledBytes is known, beside
	// DirtiedBytes: the bytes of the cgroup's dirty pages dropped
	// unwritten (truncated, or a deleted file's), a counter of the same
	// origin as DirtiedBytes. Without it such a drop reads as written.
	HasCancelled   bool
	CancelledBytes uint64
}

// Pressure is a cgroup's memory pressure stall information: cumulative
// stall time in microseconds (kernel/sched/psi.c, the "total=" field).
type Pressure struct {
	Has       bool
	SomeTotal uint64
	FullTotal uint64
	// SomeAvg10 is the 10 s running average of "some", in percent.
	SomeAvg10 float64
}

// Free is the headroom under the cgroup's limit, the quantity seed 001
// compares against its watermarks. A cgroup with no limit has NoLimit free.
func (s Stat) Free() uint64 {
	if s.Limit == NoLimit {
		return NoLimit
	}
	if s.Usage >= s.Limit {
		return 0
	}
	return s.Limit - s.Usage
}

// DirtyAndWriteback is the cgroup's pages that are dirty or under writeback,
// the quantity balance_dirty_pages() compares against the dirty limit
// (mm/page-writeback.c, mdtc->dirty = file_dirty + file_writeback).
func (s Stat) DirtyAndWriteback() uint64 { return s.Dirty + s.Writeback }
