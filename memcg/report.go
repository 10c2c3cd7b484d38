package memcg

// Field is one line of memcgd's per-cgroup statistics, in the vocabulary
// of the seeds. Known is false where this kernel does not expose the
// figure; printers show n/a rather than a made-up zero.
type Field struct {
	Name  string
	Value uint64
	Known bool
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
		{"pgpgin", c.Pgpgin, c.HasPgpg},
		{"pgpgout", c.Pgpgout, c.HasPgpg},
		{"kswapd_steal", c.PgstealKswapd, c.HasReclaim},
		{"pg_pgsteal", c.PgstealDirect, c.HasReclaim},
		{"kswapd_pgscan", c.PgscanKswapd, c.HasReclaim},
		{"pg_scan", c.PgscanDirect, c.HasReclaim},
		{"pgrefill", c.Pgrefill, c.HasReclaim},
		{"allocstall", allocstall, hasAllocstall},
	}
}

// Report is the full per-cgroup listing of `memcgd stat`, in memory.stat
// style: state, settings in force, then the seed counters. Sizes are
// bytes; NoLimit values print as "max".
func Report(s Stat, e Effective) []Field {
	k := e.Knobs
	minFree := uint64(k.MinFreeKbytes)
	if k.MinFreeKbytes == MinFreeAuto {
		minFree = DefaultMinFreeKbytes(s.Limit)
	}
	wbFirst := uint64(0)
	if k.WritebackFirst {
		wbFirst = 1
	}
	f := []Field{
		{"usage", s.Usage, true},
		{"limit", s.Limit, true},
		{"file", s.File, true},
		{"anon", s.Anon, true},
		{"dirty", s.Dirty, true},
		{"writeback", s.Writeback, true},
		{"dirty_ratio", k.DirtyRatio, true},
		{"dirty_bytes", k.DirtyBytes, true},
		{"dirty_background_ratio", k.DirtyBackgroundRatio, true},
		{"dirty_background_bytes", k.DirtyBackgroundBytes, true},
		{"dirty_background_thresh", e.Dirty.Background, true},
		{"dirty_thresh", e.Dirty.Limit, true},
		{"min_free_kbytes", minFree, true},
		{"low_wmark", e.Watermarks.Low, true},
		{"high_wmark", e.Watermarks.High, true},
		{"writeback_first", wbFirst, true},
	}
	f = append(f, s.SeedCounters()...)
	return append(f,
		Field{"memory_pressure_some_total_us", s.Pressure.SomeTotal, s.Pressure.Has},
		Field{"memory_pressure_full_total_us", s.Pressure.FullTotal, s.Pressure.Has},
	)
}
