package kernel

import (
	"strconv"

	"github.com/memcgd/memcgd/memcg"
)

// Statistics as the kernel reports them: memory.stat in the v2
// (memory_stat_format in mm/memcontrol.c) and v1 (memcg1_stat_show in
// mm/memcontrol-v1.c) formats, and seed 001's counters.

// StatLine is one "key value" line.
type StatLine struct {
	Key   string
	Value int64
}

// MemcgCount is the number of cgroups, the root included.
func (k *Kernel) MemcgCount() int { return len(k.memcgs) }

// MemcgName is cgroup m's path.
func (k *Kernel) MemcgName(m int32) string { return k.memcgs[m].Name }

// MemcgParent is m's parent (-1 for the root).
func (k *Kernel) MemcgParent(m int32) int32 { return k.memcgs[m].parent }

// SetKnobs sets m's per-cgroup knobs (the seeds' and memcgd's).
func (k *Kernel) SetKnobs(m int32, kn memcg.Knobs) {
	k.memcgs[m].Knobs = kn
	if k.opts.Seed001 != nil {
		k.opts.Seed001.setWatermarks(k, m)
	}
}

// Knobs returns m's knobs.
func (k *Kernel) Knobs(m int32) memcg.Knobs { return k.memcgs[m].Knobs }

// Stat is cgroup m as memcgd observes it (memcg.Stat, in bytes), with the
// reclaim counters of whichever hierarchy the machine runs.
func (k *Kernel) Stat(m int32) memcg.Stat {
	c := &k.memcgs[m]
	b := func(p int64) uint64 { return uint64(max(p, 0)) * PageSize }
	lim := func(p int64) uint64 {
		if p >= noLimit {
			return memcg.NoLimit
		}
		return b(p)
	}
	s := memcg.Stat{
		Usage: b(c.usage), Max: lim(c.max), High: lim(c.high),
		ActiveFile: b(c.hstat[msActiveFile]), InactiveFile: b(c.hstat[msInactiveFile]),
		Anon:  b(c.hstat[msInactiveAnon] + c.hstat[msActiveAnon]),
		Dirty: b(c.hstat[msFileDirty]), Writeback: b(c.hstat[msFileWriteback]),
	}
	s.File = s.ActiveFile + s.InactiveFile
	s.Limit = s.Max
	if k.cfg.CgroupVersion == 2 {
		s.Limit = min(s.Max, s.High)
		s.Counters.HasReclaim = true
		s.Counters.PgscanKswapd, s.Counters.PgscanDirect = uint64(c.hev[mePgscanKswapd]), uint64(c.hev[mePgscanDirect])
		s.Counters.PgstealKswapd, s.Counters.PgstealDirect = uint64(c.hev[mePgstealKswapd]), uint64(c.hev[mePgstealDirect])
		s.Counters.Pgrefill = uint64(c.hev[mePgrefill])
		s.Counters.HasEvents = true
		s.Counters.EventsHigh, s.Counters.EventsMax = uint64(c.ev[meEventsHigh]), uint64(c.ev[meEventsMax])
		s.Counters.EventsOOM = uint64(c.ev[meEventsOOM])
		s.Counters.HasWritten = true
		s.Counters.WrittenBytes = b(c.hev[meWritten])
	} else {
		s.High = memcg.NoLimit
		s.Counters.HasPgpg = true
		s.Counters.Pgpgin, s.Counters.Pgpgout = uint64(c.ev[mePgpgin]), uint64(c.ev[mePgpgout])
		s.Counters.HasFailcnt = true
		s.Counters.Failcnt = uint64(c.ev[meFailcnt])
	}
	s.Counters.HasDirtied = true
	s.Counters.DirtiedBytes = b(c.hev[meDirtied])
	return s
}

// MemoryStat renders m's memory.stat in the machine's hierarchy format.
func (k *Kernel) MemoryStat(m int32) []StatLine {
	c := &k.memcgs[m]
	P := func(p int64) int64 { return p * PageSize }
	if k.cfg.CgroupVersion == 2 {
		h := &c.hstat
		return []StatLine{
			{"anon", P(h[msInactiveAnon] + h[msActiveAnon])},
			{"file", P(h[msInactiveFile] + h[msActiveFile])},
			{"file_dirty", P(h[msFileDirty])},
			{"file_writeback", P(h[msFileWriteback])},
			{"inactive_anon", P(h[msInactiveAnon])},
			{"active_anon", P(h[msActiveAnon])},
			{"inactive_file", P(h[msInactiveFile])},
			{"active_file", P(h[msActiveFile])},
			{"pgscan", c.hev[mePgscanKswapd] + c.hev[mePgscanDirect]},
			{"pgsteal", c.hev[mePgstealKswapd] + c.hev[mePgstealDirect]},
			{"pgscan_kswapd", c.hev[mePgscanKswapd]},
			{"pgscan_direct", c.hev[mePgscanDirect]},
			{"pgsteal_kswapd", c.hev[mePgstealKswapd]},
			{"pgsteal_direct", c.hev[mePgstealDirect]},
			{"pgrefill", c.hev[mePgrefill]},
			{"pgactivate", c.hev[mePgactivate]},
			{"pgdeactivate", c.hev[mePgdeactivate]},
		}
	}
	s := &c.stat
	h := &c.hstat
	lines := []StatLine{
		{"cache", P(s[msInactiveFile] + s[msActiveFile])},
		{"rss", P(s[msInactiveAnon] + s[msActiveAnon])},
		{"dirty", P(s[msFileDirty])},
		{"writeback", P(s[msFileWriteback])},
		{"pgpgin", c.ev[mePgpgin]},
		{"pgpgout", c.ev[mePgpgout]},
		{"inactive_anon", P(s[msInactiveAnon])},
		{"active_anon", P(s[msActiveAnon])},
		{"inactive_file", P(s[msInactiveFile])},
		{"active_file", P(s[msActiveFile])},
	}
	if c.max < noLimit {
		lines = append(lines, StatLine{"hierarchical_memory_limit", P(c.max)})
	} else {
		lines = append(lines, StatLine{"hierarchical_memory_limit", 9223372036854771712})
	}
	return append(lines,
		StatLine{"total_cache", P(h[msInactiveFile] + h[msActiveFile])},
		StatLine{"total_rss", P(h[msInactiveAnon] + h[msActiveAnon])},
		StatLine{"total_dirty", P(h[msFileDirty])},
		StatLine{"total_writeback", P(h[msFileWriteback])},
		StatLine{"total_pgpgin", c.hev[mePgpgin]},
		StatLine{"total_pgpgout", c.hev[mePgpgout]},
	)
}

// SeedCounters are seed 001's memory.stat additions for one cgroup
// (hierarchical): kswapd_steal, pg_pgsteal, kswapd_pgscan, pg_scan,
// pgrefill, pgoutrun, allocstall, with pgpgin and pgpgout in pages.
type SeedCounters struct {
	Pgpgin, Pgpgout         int64
	KswapdSteal, PgPgsteal  int64
	KswapdPgscan, PgScan    int64
	Pgrefill, Pgoutrun      int64
	Allocstall              int64
	Failcnt, EventsMax, OOM int64
	Dirtied, Written        int64
	Pauses                  int64
	ProactiveSteal          int64
	ProactiveScan           int64
}

// Counters returns m's SeedCounters.
func (k *Kernel) Counters(m int32) SeedCounters {
	c := &k.memcgs[m]
	return SeedCounters{
		Pgpgin: c.hev[mePgpgin], Pgpgout: c.hev[mePgpgout],
		KswapdSteal: c.hev[mePgstealKswapd], PgPgsteal: c.hev[mePgstealDirect],
		KswapdPgscan: c.hev[mePgscanKswapd], PgScan: c.hev[mePgscanDirect],
		Pgrefill: c.hev[mePgrefill], Pgoutrun: c.hev[mePgoutrun], Allocstall: c.hev[meAllocstall],
		Failcnt: c.ev[meFailcnt], EventsMax: c.hev[meEventsMax], OOM: c.hev[meEventsOOM],
		Dirtied: c.hev[meDirtied], Written: c.hev[meWritten], Pauses: c.hev[meThrottled],
		ProactiveSteal: c.hev[meProactiveSteal], ProactiveScan: c.hev[meProactiveScan],
	}
}

// Gauges are the instantaneous quantities the time series and plots use,
// in pages.
type Gauges struct {
	Usage, Limit, Free           int64
	File, Anon, Dirty, Writeback int64
	BgThresh, Thresh             int64 // the cgroup's dirty domain (global on v1 stock)
	WmarkLow, WmarkHigh          int64 // seed 001's, or 0
	NodeFree, NodeDirty, NodeWB  int64
	GlobalBg, GlobalThresh       int64
	DiskWritten                  int64 // pages written by disk 0 so far
}

// Gauge samples cgroup m.
func (k *Kernel) Gauge(m int32) Gauges {
	c := &k.memcgs[m]
	g := Gauges{Usage: c.usage, Limit: c.max, File: c.hstat[msInactiveFile] + c.hstat[msActiveFile],
		Anon: c.hstat[msInactiveAnon] + c.hstat[msActiveAnon], Dirty: c.hstat[msFileDirty],
		Writeback: c.hstat[msFileWriteback], WmarkLow: c.kswapd.low, WmarkHigh: c.kswapd.high}
	if c.max >= noLimit {
		g.Limit = -1
		g.Free = k.node.free()
	} else {
		g.Free = c.max - min(c.max, c.usage)
	}
	gd := k.globalDtc()
	g.GlobalBg, g.GlobalThresh = gd.bgThresh, gd.thresh
	g.BgThresh, g.Thresh = gd.bgThresh, gd.thresh
	if md, ok := k.memcgDtc(m, &gd, false); ok {
		g.BgThresh, g.Thresh = md.bgThresh, md.thresh
	}
	root := &k.memcgs[0]
	g.NodeFree, g.NodeDirty, g.NodeWB = k.node.free(), root.hstat[msFileDirty], root.hstat[msFileWriteback]
	g.DiskWritten = k.disks[0].written
	return g
}

// Format renders lines as "key value\n".
func Format(lines []StatLine) string {
	b := make([]byte, 0, 32*len(lines))
	for _, l := range lines {
		b = append(b, l.Key...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, l.Value, 10)
		b = append(b, '\n')
	}
	return string(b)
}
