// Package metrics exports the daemon's per-cgroup statistics on a
// Prometheus endpoint: usage, dirty and writeback state, the thresholds and
// watermarks in force, the daemon's own actions (seed 001's kswapd_steal
// and pgoutrun, seed 000's targeted write-outs and flush fallbacks, the
// throttle's pauses) and, where the kernel has them, its own counters
// beside them. Every value is in base units (bytes, seconds) except the
// kernel's page counts, whose names say pages.
//
// Only managed cgroups are exported. The per-cgroup families are written
// straight from the daemon's status snapshot in the text format, family by
// family, with no per-sample objects: at 10,000 cgroups a registry's
// Gather built 3.7 million objects (273 MB) per scrape. The Go runtime's,
// the process's and the endpoint's own figures still go through a
// prometheus.Registry.
package metrics

import (
	"math"

	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/state"
)

// family is one per-cgroup metric family and how to read its samples off a
// Status.
type family struct {
	name, help, typ string
	// label is the family's own label beside "cgroup", "" for none.
	label string
	// samples calls emit for each of the family's samples of one cgroup,
	// none when the kernel does not expose the figure; lv is the value of
	// label. Samples come in lexical order of lv.
	samples func(st *state.Status, emit func(lv string, v float64))
}

// bytes converts a size, memcg.NoLimit (no limit) to +Inf, so that a
// comparison against it in PromQL means what it says.
func bytes(v uint64) float64 {
	if v == memcg.NoLimit {
		return math.Inf(1)
	}
	return float64(v)
}

// boolValue is 1 for true, 0 for false.
func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

const (
	gauge   = "gauge"
	counter = "counter"
)

// states are the values of state.Status.State, in lexical order.
var states = []string{state.StateActive, state.StateFrozen, state.StateIdle, state.StatePaced, state.StateThrottled}

// families lists the exported per-cgroup families, sorted by name.
func families() []family {
	return []family{
		{name: "memcgd_cgroup_action_errors_total", typ: counter,
			help: "Actions on the cgroup that failed (reclaim, write-out, flush, pause).",
			samples: func(st *state.Status, emit func(string, float64)) {
				emit("", float64(st.Counters.Errors))
			}},
		{name: "memcgd_cgroup_backstop_freezes_total", typ: counter,
			help: "Times the daemon's dirty throttle froze the cgroup: with pacing, the backstop past the limit; without, the closed-loop throttle (the same count as memcgd_cgroup_throttle_pauses_total).",
			samples: func(st *state.Status, emit func(string, float64)) {
				emit("", float64(st.Counters.Pauses))
			}},
		{name: "memcgd_cgroup_dirty_tracker", typ: gauge,
			help: "1 when the eBPF dirty tracker wakes the daemon for this cgroup, 0 when the daemon polls it at an adaptive interval (the fallback).",
			samples: func(st *state.Status, emit func(string, float64)) {
				if st.DirtyTracking != "" {
					emit("", boolValue(st.DirtyTracking == state.TrackingTracker))
				}
			}},
		{name: "memcgd_cgroup_dirty_bytes", typ: gauge,
			help: "Dirty page cache charged to the cgroup (memory.stat file_dirty on v2, dirty on v1).",
			samples: func(st *state.Status, emit func(string, float64)) {
				emit("", float64(st.Stat.Dirty))
			}},
		{name: "memcgd_cgroup_dirty_over_limit_seconds_total", typ: counter, label: "margin",
			help: "Time the cgroup's dirty+writeback was over its dirty limit (margin 0) and over 1.25 times it (margin 0.25), as the daemon's observations saw it: each level stands until the next observation, for at most an active interval; absent until the level first passed the limit. Over a window, the share of time with margin 0.25 above 0.01 is a 99th percentile above 1.25 times the limit.",
			samples: func(st *state.Status, emit func(string, float64)) {
				if c := st.Counters; c.OverLimit > 0 { // a cgroup never over its limit has none
					emit("0", c.OverLimit.Seconds())
					emit("0.25", c.OverLimitQuarter.Seconds())
				}
			}},
		{name: "memcgd_cgroup_dirty_threshold_bytes", typ: gauge, label: "threshold",
			help: "Seed 004's dirty thresholds in force, in dirty plus writeback bytes, never above an ancestor's: background starts write-out of the cgroup's files, limit throttles its writers.",
			samples: func(st *state.Status, emit func(string, float64)) {
				d := st.Effective.Dirty
				emit("background", bytes(d.Background))
				emit("limit", bytes(d.Limit))
			}},
		{name: "memcgd_cgroup_exempt", typ: gauge,
			help: "1 when the cgroup holds memcgd itself, so that the daemon neither throttles nor reclaims it (not throttled: holds memcgd).",
			samples: func(st *state.Status, emit func(string, float64)) {
				emit("", boolValue(st.Exempt != ""))
			}},
		{name: "memcgd_cgroup_flush_refused_total", typ: counter,
			help: "Full flushes the host declined, which are not failures: rate-limited host-wide, or nothing to flush.",
			samples: func(st *state.Status, emit func(string, float64)) {
				emit("", float64(st.Counters.FlushesRefused))
			}},
		{name: "memcgd_cgroup_frozen_seconds_total", typ: counter,
			help: "Time the cgroup spent frozen by the daemon's dirty throttle (the same as memcgd_cgroup_throttle_pause_seconds_total).",
			samples: func(st *state.Status, emit func(string, float64)) {
				emit("", st.Counters.Paused.Seconds())
			}},
		{name: "memcgd_cgroup_kernel_failcnt_total", typ: counter,
			help: "The kernel's memory.failcnt of the cgroup (v1 only): charges that hit the limit.",
			samples: func(st *state.Status, emit func(string, float64)) {
				if c := st.Stat.Counters; c.HasFailcnt {
					emit("", float64(c.Failcnt))
				}
			}},
		{name: "memcgd_cgroup_kernel_memory_events_total", typ: counter, label: "event",
			help: "The kernel's memory.events of the cgroup (v2 only): low, high and max boundary events, OOMs and OOM kills.",
			samples: func(st *state.Status, emit func(string, float64)) {
				if c := st.Stat.Counters; c.HasEvents {
					emit("high", float64(c.EventsHigh))
					emit("low", float64(c.EventsLow))
					emit("max", float64(c.EventsMax))
					emit("oom", float64(c.EventsOOM))
					emit("oom_kill", float64(c.EventsOOMKill))
				}
			}},
		{name: "memcgd_cgroup_kernel_pgpg_pages_total", typ: counter, label: "direction",
			help: "Pages charged to (in) and uncharged from (out) the cgroup (v1 memory.stat pgpgin, pgpgout).",
			samples: func(st *state.Status, emit func(string, float64)) {
				if c := st.Stat.Counters; c.HasPgpg {
					emit("in", float64(c.Pgpgin))
					emit("out", float64(c.Pgpgout))
				}
			}},
		{name: "memcgd_cgroup_kernel_pgscan_pages_total", typ: counter, label: "reclaimer",
			help: "Pages the kernel's reclaim scanned in the cgroup (v2 memory.stat pgscan_kswapd, pgscan_direct), by reclaimer.",
			samples: func(st *state.Status, emit func(string, float64)) {
				if c := st.Stat.Counters; c.HasReclaim {
					emit("direct", float64(c.PgscanDirect))
					emit("kswapd", float64(c.PgscanKswapd))
				}
			}},
		{name: "memcgd_cgroup_kernel_pgsteal_pages_total", typ: counter, label: "reclaimer",
			help: "Pages the kernel's reclaim freed from the cgroup (v2 memory.stat pgsteal_kswapd, pgsteal_direct), by reclaimer.",
			samples: func(st *state.Status, emit func(string, float64)) {
				if c := st.Stat.Counters; c.HasReclaim {
					emit("direct", float64(c.PgstealDirect))
					emit("kswapd", float64(c.PgstealKswapd))
				}
			}},
		{name: "memcgd_cgroup_limit_bytes", typ: gauge,
			help: "The cgroup's hard ceiling: min(memory.max, memory.high) on v2, memory.limit_in_bytes on v1; +Inf without one.",
			samples: func(st *state.Status, emit func(string, float64)) {
				emit("", bytes(st.Stat.Limit))
			}},
		{name: "memcgd_cgroup_memory_stall_seconds_total", typ: counter, label: "kind",
			help: "Time some or all of the cgroup's tasks stalled on memory (PSI memory.pressure total; on a v1 host, of the unified cgroup at the same path).",
			samples: func(st *state.Status, emit func(string, float64)) {
				const usPerSecond = 1e6
				if p := st.Stat.Pressure; p.Has {
					emit("full", float64(p.FullTotal)/usPerSecond)
					emit("some", float64(p.SomeTotal)/usPerSecond)
				}
			}},
		{name: "memcgd_cgroup_paced_seconds_total", typ: counter,
			help: "Time the cgroup's dirtying tasks ran paced by the daemon's dirty throttle, under a CPU bandwidth limit.",
			samples: func(st *state.Status, emit func(string, float64)) {
				emit("", st.Counters.PacedTime.Seconds())
			}},
		{name: "memcgd_cgroup_pace_held_seconds_total", typ: counter,
			help: "Time the CPU bandwidth limits of the daemon's paces held the cgroup's dirtying tasks (the pace groups' cpu.stat throttled time, summed over CPUs), read at most every 100 ms of the cgroup's steps while paced, and as each pacing episode ends.",
			samples: func(st *state.Status, emit func(string, float64)) {
				emit("", st.Counters.PaceHeld.Seconds())
			}},
		{name: "memcgd_cgroup_paces_total", typ: counter,
			help: "Pacing episodes of the cgroup's dirtying tasks by the daemon's dirty throttle (CPU bandwidth, the throttle's way where the hierarchy allows it).",
			samples: func(st *state.Status, emit func(string, float64)) {
				emit("", float64(st.Counters.Paces))
			}},
		{name: "memcgd_cgroup_reclaim_overshoot_bytes_total", typ: counter,
			help: "Free space past the high watermark at the end of the daemon's background reclaim runs, summed: what they reclaimed past where seed 001's kswapd stops.",
			samples: func(st *state.Status, emit func(string, float64)) {
				emit("", float64(st.Counters.ReclaimOvershootBytes))
			}},
		{name: "memcgd_cgroup_reclaim_runs_total", typ: counter,
			help: "Background reclaim runs, each from below the low watermark up to the high one (seed 001's pgoutrun).",
			samples: func(st *state.Status, emit func(string, float64)) {
				emit("", float64(st.Counters.ReclaimRuns))
			}},
		{name: "memcgd_cgroup_reclaimed_bytes_total", typ: counter,
			help: "Bytes the daemon's background reclaim took from the cgroup (seed 001's kswapd_steal, in bytes).",
			samples: func(st *state.Status, emit func(string, float64)) {
				emit("", float64(st.Counters.ReclaimedBytes))
			}},
		{name: "memcgd_cgroup_state", typ: gauge, label: "state",
			help: "What the daemon is doing to the cgroup now, 1 for that state and 0 for the others: idle, active (over a threshold, writing out or reclaiming), paced, throttled (a throttle episode open, between freezes) or frozen. None before the cgroup's first step.",
			samples: func(st *state.Status, emit func(string, float64)) {
				if st.State == "" {
					return
				}
				for _, s := range states {
					emit(s, boolValue(st.State == s))
				}
			}},
		{name: "memcgd_cgroup_throttle_available", typ: gauge,
			help: "1 when the daemon can throttle the cgroup's writers; 0 when it holds memcgd or no freezer reaches it (the log and the status say why).",
			samples: func(st *state.Status, emit func(string, float64)) {
				emit("", boolValue(st.Throttle == ""))
			}},
		{name: "memcgd_cgroup_throttle_unavailable_info", typ: gauge, label: "reason",
			help: "1, labelled with the reason, for a cgroup the daemon does not throttle: it holds memcgd, or no freezer reaches it.",
			samples: func(st *state.Status, emit func(string, float64)) {
				if st.Throttle != "" {
					emit(st.Throttle, 1)
				}
			}},
		{name: "memcgd_cgroup_throttle_pause_seconds_total", typ: counter,
			help: "Time the cgroup's tasks spent paused by the daemon's dirty throttle.",
			samples: func(st *state.Status, emit func(string, float64)) {
				emit("", st.Counters.Paused.Seconds())
			}},
		{name: "memcgd_cgroup_throttle_pauses_total", typ: counter,
			help: "Times the daemon paused the cgroup's tasks for being over its dirty limit.",
			samples: func(st *state.Status, emit func(string, float64)) {
				emit("", float64(st.Counters.Pauses))
			}},
		{name: "memcgd_cgroup_usage_bytes", typ: gauge,
			help: "Memory charged to the cgroup (v2 memory.current, v1 memory.usage_in_bytes).",
			samples: func(st *state.Status, emit func(string, float64)) {
				emit("", float64(st.Stat.Usage))
			}},
		{name: "memcgd_cgroup_watermark_bytes", typ: gauge, label: "mark",
			help: "Seed 001's reclaim watermarks in bytes of free space under the limit: background reclaim wakes below low and runs until high; all 0 when disabled.",
			samples: func(st *state.Status, emit func(string, float64)) {
				w := st.Effective.Watermarks
				emit("high", float64(w.High))
				emit("low", float64(w.Low))
				emit("min", float64(w.Min))
			}},
		{name: "memcgd_cgroup_writeback_bytes", typ: gauge,
			help: "Page cache of the cgroup under writeback (memory.stat file_writeback on v2, writeback on v1).",
			samples: func(st *state.Status, emit func(string, float64)) {
				emit("", float64(st.Stat.Writeback))
			}},
		{name: "memcgd_cgroup_writeout_bytes_total", typ: counter, label: "kind",
			help: "The cgroup's dirty bytes when each write-out began, by kind as memcgd_cgroup_writeout_total.",
			samples: func(st *state.Status, emit func(string, float64)) {
				emit("flush", float64(st.Counters.FlushBytes))
				emit("targeted", float64(st.Counters.WriteOutBytes))
			}},
		{name: "memcgd_cgroup_writeout_yielded_total", typ: counter,
			help: "Targeted write-outs of the cgroup's files that spaced their chunks (memcgd run --write-out-yield) because another task was syncing on one of their devices (a cache flush there within 100 ms), so that its fsyncs waited less behind them. Absent until the first.",
			samples: func(st *state.Status, emit func(string, float64)) {
				if n := st.Counters.WriteOutsYielded; n > 0 {
					emit("", float64(n))
				}
			}},
		{name: "memcgd_cgroup_writeout_total", typ: counter, label: "kind",
			help: "Write-outs started for the cgroup: targeted at its own files (seed 000), or a full flush of its filesystems (seed 000's fallback).",
			samples: func(st *state.Status, emit func(string, float64)) {
				emit("flush", float64(st.Counters.Flushes))
				emit("targeted", float64(st.Counters.WriteOuts))
			}},
	}
}
