// Package metrics exports the daemon's per-cgroup statistics on a
// Prometheus endpoint: usage, dirty and writeback state, the thresholds and
// watermarks in force, the daemon's own actions (seed 001's kswapd_steal
// and pgoutrun, seed 000's targeted write-outs and flush fallbacks, the
// throttle's pauses) and, where the kernel has them, its own counters
// beside them. Every value is in base units (bytes, seconds) except the
// kernel's page counts, whose names say pages.
package metrics

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/state"
)

// Collector is a prometheus.Collector over the daemon's status snapshot. It
// keeps nothing between scrapes: each scrape calls the snapshot function
// and reports exactly what it returns.
type Collector struct {
	snapshot func() []state.Status
	families []family
}

// family is one metric family and how to read its samples off a Status.
type family struct {
	desc *prometheus.Desc
	typ  prometheus.ValueType
	// samples returns the family's samples of one cgroup, none when the
	// kernel does not expose the figure. label is the value of the
	// family's own label, "" for a family without one.
	samples func(st *state.Status) []sample
}

type sample struct {
	label string
	value float64
}

// NewCollector returns a collector that reports snapshot() at each scrape.
func NewCollector(snapshot func() []state.Status) *Collector {
	return &Collector{snapshot: snapshot, families: families()}
}

// NewRegistry returns a registry holding a Collector over snapshot, and
// the Go runtime and process collectors.
func NewRegistry(snapshot func() []state.Status) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{
		NewCollector(snapshot),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// Describe sends the descriptors of every family.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range c.families {
		ch <- f.desc
	}
}

// Collect sends every family's samples for every cgroup of the snapshot.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	sts := c.snapshot()
	for i := range sts {
		st := &sts[i]
		for _, f := range c.families {
			for _, s := range f.samples(st) {
				labels := []string{string(st.Cgroup)}
				if s.label != "" {
					labels = append(labels, s.label)
				}
				ch <- prometheus.MustNewConstMetric(f.desc, f.typ, s.value, labels...)
			}
		}
	}
}

// bytes converts a size, memcg.NoLimit (no limit) to +Inf, so that a
// comparison against it in PromQL means what it says.
func bytes(v uint64) float64 {
	if v == memcg.NoLimit {
		return math.Inf(1)
	}
	return float64(v)
}

// one is the single sample of a family without a label of its own.
func one(v float64) []sample { return []sample{{value: v}} }

// known returns samples when has is true, none otherwise.
func known(has bool, s ...sample) []sample {
	if !has {
		return nil
	}
	return s
}

// families lists the exported metric families.
func families() []family {
	gauge := func(name, help string, label string, fn func(st *state.Status) []sample) family {
		return newFamily(prometheus.GaugeValue, name, help, label, fn)
	}
	counter := func(name, help string, label string, fn func(st *state.Status) []sample) family {
		return newFamily(prometheus.CounterValue, name, help, label, fn)
	}
	return []family{
		gauge("memcgd_cgroup_usage_bytes",
			"Memory charged to the cgroup (v2 memory.current, v1 memory.usage_in_bytes).", "",
			func(st *state.Status) []sample { return one(float64(st.Stat.Usage)) }),
		gauge("memcgd_cgroup_limit_bytes",
			"The cgroup's hard ceiling: min(memory.max, memory.high) on v2, memory.limit_in_bytes on v1; +Inf without one.", "",
			func(st *state.Status) []sample { return one(bytes(st.Stat.Limit)) }),
		gauge("memcgd_cgroup_dirty_bytes",
			"Dirty page cache charged to the cgroup (memory.stat file_dirty on v2, dirty on v1).", "",
			func(st *state.Status) []sample { return one(float64(st.Stat.Dirty)) }),
		gauge("memcgd_cgroup_writeback_bytes",
			"Page cache of the cgroup under writeback (memory.stat file_writeback on v2, writeback on v1).", "",
			func(st *state.Status) []sample { return one(float64(st.Stat.Writeback)) }),
		gauge("memcgd_cgroup_dirty_threshold_bytes",
			"Seed 004's dirty thresholds in force, in dirty plus writeback bytes, never above an ancestor's: background starts write-out of the cgroup's files, limit throttles its writers.",
			"threshold",
			func(st *state.Status) []sample {
				d := st.Effective.Dirty
				return []sample{{"background", bytes(d.Background)}, {"limit", bytes(d.Limit)}}
			}),
		gauge("memcgd_cgroup_watermark_bytes",
			"Seed 001's reclaim watermarks in bytes of free space under the limit: background reclaim wakes below low and runs until high; all 0 when disabled.",
			"mark",
			func(st *state.Status) []sample {
				w := st.Effective.Watermarks
				return []sample{{"min", float64(w.Min)}, {"low", float64(w.Low)}, {"high", float64(w.High)}}
			}),
		counter("memcgd_cgroup_reclaimed_bytes_total",
			"Bytes the daemon's background reclaim took from the cgroup (seed 001's kswapd_steal, in bytes).", "",
			func(st *state.Status) []sample { return one(float64(st.Counters.ReclaimedBytes)) }),
		counter("memcgd_cgroup_reclaim_runs_total",
			"Background reclaim runs, each from below the low watermark up to the high one (seed 001's pgoutrun).", "",
			func(st *state.Status) []sample { return one(float64(st.Counters.ReclaimRuns)) }),
		counter("memcgd_cgroup_writeout_total",
			"Write-outs started for the cgroup: targeted at its own files (seed 000), or a full flush of its filesystems (seed 000's fallback).",
			"kind",
			func(st *state.Status) []sample {
				c := st.Counters
				return []sample{{"targeted", float64(c.WriteOuts)}, {"flush", float64(c.Flushes)}}
			}),
		counter("memcgd_cgroup_writeout_bytes_total",
			"The cgroup's dirty bytes when each write-out began, by kind as memcgd_cgroup_writeout_total.",
			"kind",
			func(st *state.Status) []sample {
				c := st.Counters
				return []sample{{"targeted", float64(c.WriteOutBytes)}, {"flush", float64(c.FlushBytes)}}
			}),
		counter("memcgd_cgroup_throttle_pauses_total",
			"Times the daemon paused the cgroup's tasks for being over its dirty limit.", "",
			func(st *state.Status) []sample { return one(float64(st.Counters.Pauses)) }),
		counter("memcgd_cgroup_throttle_pause_seconds_total",
			"Time the cgroup's tasks spent paused by the daemon's dirty throttle.", "",
			func(st *state.Status) []sample { return one(st.Counters.Paused.Seconds()) }),
		counter("memcgd_cgroup_action_errors_total",
			"Actions on the cgroup that failed (reclaim, write-out, flush, pause).", "",
			func(st *state.Status) []sample { return one(float64(st.Counters.Errors)) }),

		counter("memcgd_cgroup_kernel_memory_events_total",
			"The kernel's memory.events of the cgroup (v2 only): low, high and max boundary events, OOMs and OOM kills.",
			"event",
			func(st *state.Status) []sample {
				c := st.Stat.Counters
				return known(c.HasEvents,
					sample{"low", float64(c.EventsLow)}, sample{"high", float64(c.EventsHigh)}, sample{"max", float64(c.EventsMax)},
					sample{"oom", float64(c.EventsOOM)}, sample{"oom_kill", float64(c.EventsOOMKill)})
			}),
		counter("memcgd_cgroup_kernel_failcnt_total",
			"The kernel's memory.failcnt of the cgroup (v1 only): charges that hit the limit.", "",
			func(st *state.Status) []sample {
				c := st.Stat.Counters
				return known(c.HasFailcnt, sample{value: float64(c.Failcnt)})
			}),
		counter("memcgd_cgroup_kernel_pgscan_pages_total",
			"Pages the kernel's reclaim scanned in the cgroup (v2 memory.stat pgscan_kswapd, pgscan_direct), by reclaimer.",
			"reclaimer",
			func(st *state.Status) []sample {
				c := st.Stat.Counters
				return known(c.HasReclaim, sample{"kswapd", float64(c.PgscanKswapd)}, sample{"direct", float64(c.PgscanDirect)})
			}),
		counter("memcgd_cgroup_kernel_pgsteal_pages_total",
			"Pages the kernel's reclaim freed from the cgroup (v2 memory.stat pgsteal_kswapd, pgsteal_direct), by reclaimer.",
			"reclaimer",
			func(st *state.Status) []sample {
				c := st.Stat.Counters
				return known(c.HasReclaim, sample{"kswapd", float64(c.PgstealKswapd)}, sample{"direct", float64(c.PgstealDirect)})
			}),
		counter("memcgd_cgroup_kernel_pgpg_pages_total",
			"Pages charged to (in) and uncharged from (out) the cgroup (v1 memory.stat pgpgin, pgpgout).",
			"direction",
			func(st *state.Status) []sample {
				c := st.Stat.Counters
				return known(c.HasPgpg, sample{"in", float64(c.Pgpgin)}, sample{"out", float64(c.Pgpgout)})
			}),
		counter("memcgd_cgroup_memory_stall_seconds_total",
			"Time some or all of the cgroup's tasks stalled on memory (PSI memory.pressure total; on a v1 host, of the unified cgroup at the same path).",
			"kind",
			func(st *state.Status) []sample {
				p := st.Stat.Pressure
				const usPerSecond = 1e6
				return known(p.Has, sample{"some", float64(p.SomeTotal) / usPerSecond}, sample{"full", float64(p.FullTotal) / usPerSecond})
			}),
	}
}

func newFamily(typ prometheus.ValueType, name, help, label string, fn func(st *state.Status) []sample) family {
	labels := []string{"cgroup"}
	if label != "" {
		labels = append(labels, label)
	}
	return family{desc: prometheus.NewDesc(name, help, labels, nil), typ: typ, samples: fn}
}
