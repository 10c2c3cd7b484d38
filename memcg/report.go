package memcg

import "strconv"

// Field is one line of memcgd's per-cgroup statistics, in the vocabulary
// of the seeds. Known is false where this kernel does not expose the
// figure; printers show n/a rather than a made-up zero.
type Field struct {
	Name  string
	Value uint64
	Known bool
	// Kind says how Value reads.
	Kind Kind
}

// Kind is what a Field's Value is, so that every printer shows it alike:
// memcgd stat prints a flag as true or false and a size with no limit as
// max; its JSON, a flag as a boolean and no limit as null.
type Kind uint8

// The kinds of Field.
const (
	// KindNumber is a count of events or pages, a percentage, KiB or
	// microseconds: the field's name says which.
	KindNumber Kind = iota
	// KindBytes is a size in bytes; NoLimit is no limit.
	KindBytes
	// KindFlag is a yes/no, 1 or 0.
	KindFlag
)

// Text is the value as memcgd stat prints it: n/a where unknown, true or
// false for a flag, max for a size with no limit, else the number.
func (f Field) Text() string {
	switch {
	case !f.Known:
		return "n/a"
	case f.Kind == KindFlag:
		return strconv.FormatBool(f.Value != 0)
	case f.Kind == KindBytes && f.Value == NoLimit:
		return "max"
	}
	return strconv.FormatUint(f.Value, 10)
}

// JSON is the value for JSON: null (nil) where unknown and for a size with
// no limit, a boolean for a flag, else the number.
func (f Field) JSON() any {
	switch {
	case !f.Known, f.Kind == KindBytes && f.Value == NoLimit:
		return nil
	case f.Kind == KindFlag:
		return f.Value != 0
	}
	return f.Value
}

// Flag is 1 for true, 0 for false: a KindFlag Value.
func Flag(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// SeedCounters derives seed 001's per-cgroup statistics from what the
// kernel exposes. No kernel has a per-cgroup kswapd, so each is the
// nearest kernel counter, as the help of `memcgd stat` explains:
//
//	kswapd_pgscan, kswapd_steal  v2 pgscan_kswapd, pgsteal_kswapd (pages)
//	pg_scan, pg_pgsteal          v2 pgscan_direct, pgsteal_direct (pages):
//	                             limit (direct) reclaim in the cgroup
//	pgrefill                     v2 pgrefill (pages)
//	allocstall                   v2 memory.events max, v1 memory.failcnt:
//	                             times a charge hit the limit and had to
//	                             reclaim directly
//	pgpgin, pgpgout              v1 only (pages)
//
// memcgd's own background reclaim (its kswapd_steal and pgoutrun) is
// counted by the daemon, not here.
func (s Stat) SeedCounters() []Field {
	c := s.Counters
	allocstall, hasAllocstall := c.EventsMax, c.HasEvents
	if !hasAllocstall && c.HasFailcnt {
		allocstall, hasAllocstall = c.Failcnt, true
	}
	return []Field{
		{"pgpgin", c.Pgpgin, c.HasPgpg, KindNumber},
		{"pgpgout", c.Pgpgout, c.HasPgpg, KindNumber},
		{"kswapd_steal", c.PgstealKswapd, c.HasReclaim, KindNumber},
		{"pg_pgsteal", c.PgstealDirect, c.HasReclaim, KindNumber},
		{"kswapd_pgscan", c.PgscanKswapd, c.HasReclaim, KindNumber},
		{"pg_scan", c.PgscanDirect, c.HasReclaim, KindNumber},
		{"pgrefill", c.Pgrefill, c.HasReclaim, KindNumber},
		{"allocstall", allocstall, hasAllocstall, KindNumber},
	}
}

// Report is the full per-cgroup listing of `memcgd stat`, in memory.stat
// style: state, settings in force, then the seed counters. Sizes are
// bytes (KindBytes); the limit of an unlimited cgroup is NoLimit.
func Report(s Stat, e Effective) []Field {
	k := e.Knobs
	minFree := uint64(k.MinFreeKbytes)
	if k.MinFreeKbytes == MinFreeAuto {
		minFree = DefaultMinFreeKbytes(s.Limit)
	}
	f := []Field{
		{"usage", s.Usage, true, KindBytes},
		{"limit", s.Limit, true, KindBytes},
		{"file", s.File, true, KindBytes},
		{"anon", s.Anon, true, KindBytes},
		{"dirty", s.Dirty, true, KindBytes},
		{"writeback", s.Writeback, true, KindBytes},
		{"dirty_ratio", k.DirtyRatio, true, KindNumber},
		{"dirty_bytes", k.DirtyBytes, true, KindBytes},
		{"dirty_background_ratio", k.DirtyBackgroundRatio, true, KindNumber},
		{"dirty_background_bytes", k.DirtyBackgroundBytes, true, KindBytes},
		{"dirty_background_thresh", e.Dirty.Background, true, KindBytes},
		{"dirty_thresh", e.Dirty.Limit, true, KindBytes},
		{"min_free_kbytes", minFree, true, KindNumber},
		{"low_wmark", e.Watermarks.Low, true, KindBytes},
		{"high_wmark", e.Watermarks.High, true, KindBytes},
		{"writeback_first", Flag(k.WritebackFirst), true, KindFlag},
	}
	f = append(f, s.SeedCounters()...)
	return append(f,
		Field{"memory_pressure_some_total_us", s.Pressure.SomeTotal, s.Pressure.Has, KindNumber},
		Field{"memory_pressure_full_total_us", s.Pressure.FullTotal, s.Pressure.Has, KindNumber},
	)
}
