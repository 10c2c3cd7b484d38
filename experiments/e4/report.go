package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/memcgd/memcgd/experiments/internal/lab"
	"github.com/memcgd/memcgd/memcg"
)

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// perOp is d per op in microseconds; NaN without ops.
func perOp(d time.Duration, ops uint64) float64 {
	if ops == 0 {
		return math.NaN()
	}
	return float64(d) / float64(ops) / float64(time.Microsecond)
}

// share is part over whole in percent; NaN when whole is 0.
func share(part, whole float64) float64 {
	if whole == 0 {
		return math.NaN()
	}
	return part / whole * 100
}

// adder adds rows to a per-run comparison and to the medians at once.
type adder struct {
	t *lab.Compare
	m *lab.Medians
}

func (a adder) num(name, format string, v []float64) {
	a.t.Num(name, format, v...)
	a.m.Num(name, format, v...)
}

// victimRows adds the victims' rows for vs, one per arm (or the one
// "alone" column).
func victimRows(a adder, vs []victims, categorised bool) {
	num := func(name, format string, f func(victims) float64) {
		v := make([]float64, len(vs))
		for i := range vs {
			v[i] = f(vs[i])
		}
		a.num(name, format, v)
	}
	num("sleeper: wake-ups", "%.0f", func(v victims) float64 { return float64(v.sleep.Ops) })
	num("sleeper: lateness p50 (ms)", "%.3f", func(v victims) float64 { return ms(v.sleep.Latency.P50) })
	num("sleeper: lateness p99 (ms)", "%.2f", func(v victims) float64 { return ms(v.sleep.Latency.P99) })
	num("sleeper: lateness max (ms)", "%.1f", func(v victims) float64 { return ms(v.sleep.Latency.Max) })
	num("machine stalls: every CPU's 1 ms sleeper over 5 ms late at once", "%.0f", func(v victims) float64 { return float64(v.stalls.Count) })
	num("  time in them (ms)", "%.1f", func(v victims) float64 { return ms(v.stalls.Total) })
	num("  the longest (ms)", "%.1f", func(v victims) float64 { return ms(v.stalls.Max) })
	num("log: syncs completed", "%.0f", func(v victims) float64 { return float64(v.sync.Ops) })
	num("log: syncs a second", "%.0f", func(v victims) float64 { return v.sync.Rate() })
	num("log: write+fdatasync p50 (ms)", "%.3f", func(v victims) float64 { return ms(v.sync.Latency.P50) })
	num("log: write+fdatasync p99 (ms)", "%.2f", func(v victims) float64 { return ms(v.sync.Latency.P99) })
	num("log: write+fdatasync p99.9 (ms)", "%.1f", func(v victims) float64 { return ms(v.sync.Latency.P999) })
	num("log: write+fdatasync max (ms)", "%.1f", func(v victims) float64 { return ms(v.sync.Latency.Max) })
	num("log: syncs over 10 ms", "%.0f", func(v victims) float64 { return float64(v.sync.Slow) })
	num("log: mean time per loop, write+fdatasync and the loop's own (µs)", "%.0f", func(v victims) float64 { return perOp(v.sync.Wall, v.sync.Ops) })
	num("log: mean time in write(2) (µs)", "%.0f", func(v victims) float64 { return perOp(v.sync.WriteTime, v.sync.Ops) })
	num("log: mean time in fdatasync (µs)", "%.0f", func(v victims) float64 { return perOp(v.sync.SyncTime, v.sync.Ops) })
	num("log: thread's wait for a CPU, per sync (µs)", "%.0f", func(v victims) float64 { return perOp(v.sync.Sched.Wait, v.sync.Ops) })
	num("log: thread's wait for a CPU (% of its time)", "%.1f", func(v victims) float64 { return share(float64(v.sync.Sched.Wait), float64(v.sync.Wall)) })
	num("log: thread blocked or asleep (% of its time)", "%.1f", func(v victims) float64 { return share(float64(v.sync.OffCPU()), float64(v.sync.Wall)) })
	num("log: cgroup's I/O stall, PSI io some (% of the time)", "%.1f", func(v victims) float64 {
		return share(float64(v.syncPSI.IO)*1e3, float64(v.sync.Wall))
	})
	if categorised {
		// A category's share of the samples times the loop's mean time
		// is the mean time a sync spends there: what each wait adds.
		for _, c := range syncCategories {
			num("log: per sync, "+c+" (µs, from the stack samples)", "%.0f", func(v victims) float64 {
				return categoryShare(v.stacks[taskSync], c) / 100 * perOp(v.sync.Wall, v.sync.Ops)
			})
		}
	}
	num("buffered writer: throughput (MiB/s)", "%.1f", func(v victims) float64 { return lab.MiB(uint64(v.bg.Throughput())) })
	num("buffered writer: write(2) p99 (ms)", "%.2f", func(v victims) float64 { return ms(v.bg.Latency.P99) })
	num("buffered writer: write(2) max (ms)", "%.1f", func(v victims) float64 { return ms(v.bg.Latency.Max) })
	num("buffered writer: time in write(2) (% of its time)", "%.1f", func(v victims) float64 { return share(float64(v.bg.WriteTime), float64(v.bg.Wall)) })
	num("buffered writer: thread's wait for a CPU (% of its time)", "%.1f", func(v victims) float64 { return share(float64(v.bg.Sched.Wait), float64(v.bg.Wall)) })
	if categorised {
		num("buffered writer: stack samples in balance_dirty_pages (%)", "%.1f", func(v victims) float64 {
			return categoryShare(v.stacks[taskBg], catBalance)
		})
	}
	num("device: write rate (MiB/s)", "%.1f", func(v victims) float64 { return v.disk.WriteMiBps() })
	num("device: busy (%)", "%.1f", func(v victims) float64 { return v.disk.BusyPercent() })
	num("device: mean write request time, queued + served (ms)", "%.2f", func(v victims) float64 { return v.disk.WriteLatencyMs() })
	num("device: mean requests in flight", "%.1f", func(v victims) float64 { return v.disk.MeanInFlight() })
	num("device: cache flushes", "%.0f", func(v victims) float64 {
		if !v.disk.OK || !v.disk.HasFlush {
			return math.NaN()
		}
		return float64(v.disk.Flushes)
	})
	num("device: mean cache flush time (ms)", "%.2f", func(v victims) float64 { return v.disk.FlushLatencyMs() })
}

// journalRows adds the journal's rows, when the filesystem has one.
func journalRows(a adder, vs []victims, categorised bool) {
	num := func(name, format string, f func(victims) float64) {
		v := make([]float64, len(vs))
		for i := range vs {
			v[i] = f(vs[i])
		}
		a.num(name, format, v)
	}
	num("journal: commits", "%.0f", func(v victims) float64 { return float64(v.journal1.Transactions - v.journal0.Transactions) })
	num("journal: commits asked for (fsync)", "%.0f", func(v victims) float64 { return float64(v.journal1.Requested - v.journal0.Requested) })
	num("journal: the kernel's average commit time at the end (ms)", "%.2f", func(v victims) float64 { return ms(v.journal1.CommitTime) })
	num("journal: jbd2 thread's wait for a CPU (ms)", "%.1f", func(v victims) float64 { return ms(v.jbd2.Wait) })
	if categorised {
		for _, c := range journalCategories {
			num("journal: jbd2 stack samples in "+c+" (%)", "%.1f", func(v victims) float64 { return categoryShare(v.stacks[taskJournl], c) })
		}
	}
}

// aloneRows adds the rows of the victims alone.
func aloneRows(t *lab.Compare, m *lab.Medians, v victims) {
	victimRows(adder{t, m}, []victims{v}, v.stacks != nil)
}

// rows adds one run's rows for the arms (stock first) to t and m. solo is
// the run's victims alone (zero when not measured).
func rows(t *lab.Compare, m *lab.Medians, res []result, solo victims, env armEnv) {
	a := adder{t, m}
	num := func(name, format string, f func(result) float64) {
		v := make([]float64, len(res))
		for i := range res {
			v[i] = f(res[i])
		}
		a.num(name, format, v)
	}
	text := func(name string, f func(result) string) {
		v := make([]string, len(res))
		for i := range res {
			v[i] = f(res[i])
		}
		t.Text(name, v...)
	}
	daemon := func(f func(lab.DaemonResult) float64) func(result) float64 {
		return func(r result) float64 {
			if r.daemon.Fields == nil {
				return math.NaN()
			}
			return f(r.daemon)
		}
	}
	field := func(name string) func(result) float64 {
		return daemon(func(d lab.DaemonResult) float64 { return float64(d.Fields[name]) })
	}
	num("disk settle before the arm (s): the wait for its probe (lab.Settle)", "%.1f", func(r result) float64 { return r.settleWait.Seconds() })
	num("disk settle: the slowest probe of its last round (ms)", "%.2f", func(r result) float64 { return ms(r.settleSlowest) })
	text("disk settled before the arm", func(r result) string {
		if r.settled {
			return "yes"
		}
		return "no: the limit passed"
	})
	text("load average (1, 5, 15 min) at the arm's start", func(r result) string { return r.load0 })
	num("load average (1 min) at the arm's start", "%.2f", func(r result) float64 { return loadOne(r.load0) })
	num("load average (1 min) at the arm's end", "%.2f", func(r result) float64 { return loadOne(r.load1) })
	text("dirty-tracking path", func(r result) string {
		if r.daemon.Fields == nil {
			return "—"
		}
		return r.daemon.Tracker()
	})
	for _, f := range []string{"dirty_thresh", "dirty_background_thresh"} {
		text("memcgd: "+f+" of the writer's cgroup", func(r result) string {
			v, ok := r.daemon.Fields[f]
			if !ok {
				return "—"
			}
			return memcg.FormatSize(v)
		})
	}
	num("arm's time, setup and cleanup included (s)", "%.0f", func(r result) float64 { return r.wall.Seconds() })
	num("writer: throughput, write phase (MiB/s)", "%.1f", func(r result) float64 { return lab.MiB(uint64(r.w.Throughput())) })
	num("writer: throughput with the final fsync (MiB/s)", "%.1f", func(r result) float64 { return lab.MiB(uint64(r.w.DiskThroughput())) })
	num("writer: time, writes + fsync (s)", "%.1f", func(r result) float64 { return r.w.WriteSeconds + r.w.FsyncSeconds })
	num("writer: reads", "%.0f", func(r result) float64 { return float64(r.w.Reads) })
	num("writer: short reads", "%.0f", func(r result) float64 { return float64(r.w.ShortReads) })
	text("writer: first short reads, seconds after its start", func(r result) string {
		var at []string
		for _, s := range r.w.ShortReadsAt[:min(len(r.w.ShortReadsAt), 8)] {
			at = append(at, fmt.Sprintf("%.2f", s))
		}
		if len(at) == 0 {
			return "—"
		}
		return strings.Join(at, " ")
	})
	num("writer: short writes", "%.0f", func(r result) float64 { return float64(r.w.ShortWrites) })
	num("writer: calls failed with EINTR", "%.0f", func(r result) float64 { return float64(r.w.EINTR) })
	num("writer: pipe feeder's short writes", "%.0f", func(r result) float64 { return float64(r.w.FeederShortWrites) })
	vs := make([]victims, len(res))
	for i := range res {
		vs[i] = res[i].victims
	}
	victimRows(a, vs, res[0].stacks != nil)
	if solo.bg.Wall > 0 {
		num("buffered writer: throughput / its throughput alone", "%.3f", func(r result) float64 {
			return r.bg.Throughput() / solo.bg.Throughput()
		})
	}
	if env.hasJournal {
		journalRows(a, vs, res[0].stacks != nil)
	}
	num("memcgd: CPU during the run (% of one core)", "%.1f", daemon(func(d lab.DaemonResult) float64 {
		if d.Busy < 0 {
			return math.NaN()
		}
		return d.Busy * 100
	}))
	num("memcgd: of it in write-out, flush and reclaim calls (% of one core)", "%.1f", daemon(lab.DaemonResult.KernelWorkPercent))
	num("memcgd: steps (looks at a cgroup), a second", "%.0f", daemon(lab.DaemonResult.StepRate))
	num("memcgd: its loop's wake-ups for its timers", "%.0f", daemon(lab.DaemonResult.TimerWakeUps))
	num("  how late they came, p50 (ms; memcgd_timer_lateness_seconds)", "%.2f", daemon(lab.DaemonResult.LateP50))
	num("  p99 (ms)", "%.2f", daemon(lab.DaemonResult.LateP99))
	num("memcgd: its threads put on a CPU, a second", "%.0f", daemon(func(d lab.DaemonResult) float64 {
		if d.BusyWall == 0 {
			return math.NaN()
		}
		return float64(d.Sched.Slices) / d.BusyWall.Seconds()
	}))
	num("memcgd: throttle pauses", "%.0f", field("throttle_pauses"))
	num("memcgd: time paused (% of the run)", "%.1f", daemon(func(d lab.DaemonResult) float64 {
		if d.BusyWall == 0 {
			return math.NaN()
		}
		return share(float64(d.Fields["throttle_paused_us"])*1e3, float64(d.BusyWall))
	}))
	num("memcgd: time its pace held the writer (% of the run; summed over CPUs)", "%.1f", daemon(func(d lab.DaemonResult) float64 {
		if d.BusyWall == 0 {
			return math.NaN()
		}
		return share(float64(d.Fields["throttle_pace_held_us"])*1e3, float64(d.BusyWall))
	}))
	num("memcgd: targeted write-outs", "%.0f", field("writeout_targeted"))
	num("memcgd: of them spaced for a syncing neighbour (--write-out-yield)", "%.0f", field("writeout_targeted_yielded"))
	num("memcgd: bytes written out (MiB)", "%.0f", daemon(func(d lab.DaemonResult) float64 { return lab.MiB(d.Fields["writeout_targeted_bytes"]) }))
	num("memcgd: full flushes", "%.0f", field("writeout_flush"))
	num("memcgd: background reclaim runs", "%.0f", field("pgoutrun"))
	num("memcgd: reclaimed (MiB)", "%.0f", daemon(func(d lab.DaemonResult) float64 { return lab.MiB(d.Fields["reclaimed_bytes"]) }))
}

// loadOne is the 1-minute figure of a LoadAvg; NaN when unread.
func loadOne(load string) float64 {
	f := strings.Fields(load)
	if len(f) == 0 {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// ratios records one run's ratios to the stock arm of the same run.
func ratios(t *lab.Targets, arms []lab.Arm, res []result, solo victims) {
	stock := res[0]
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return math.NaN()
		}
		return a / b
	}
	for i := 1; i < len(arms); i++ {
		r, name := res[i], arms[i].Name
		t.Add("log: write+fdatasync p99 / stock's", name, "%.2f", nil, ratio(float64(r.sync.Latency.P99), float64(stock.sync.Latency.P99)))
		t.Add("log: write+fdatasync p99.9 / stock's", name, "%.2f", nil, ratio(float64(r.sync.Latency.P999), float64(stock.sync.Latency.P999)))
		t.Add("log: syncs a second / stock's", name, "%.3f", nil, ratio(r.sync.Rate(), stock.sync.Rate()))
		t.Add("sleeper: lateness p99 / stock's", name, "%.2f", nil, ratio(float64(r.sleep.Latency.P99), float64(stock.sleep.Latency.P99)))
		t.Add("buffered writer: throughput / stock's", name, "%.3f", nil, ratio(r.bg.Throughput(), stock.bg.Throughput()))
		t.Add("writer: throughput with the fsync / stock's", name, "%.3f", nil, ratio(r.w.DiskThroughput(), stock.w.DiskThroughput()))
	}
	if solo.sync.Wall > 0 {
		for i, a := range arms {
			r := res[i]
			t.Add("log: write+fdatasync p99 / alone", a.Name, "%.2f", nil, ratio(float64(r.sync.Latency.P99), float64(solo.sync.Latency.P99)))
			t.Add("buffered writer: throughput / alone", a.Name, "%.3f", nil, ratio(r.bg.Throughput(), solo.bg.Throughput()))
		}
	}
}

// mergeStacks adds an arm's stack samples, by task, into all, keyed by
// arm and task.
func mergeStacks(all map[string]lab.Stacks, arm string, got map[string]lab.Stacks) {
	for task, s := range got {
		k := arm + "\x00" + task
		m, ok := all[k]
		if !ok {
			m = lab.Stacks{Task: s.Task, ByStack: map[string]int{}}
		}
		m.N += s.N
		for st, n := range s.ByStack {
			m.ByStack[st] += n
		}
		all[k] = m
	}
}

// topStacks renders, for each arm and sampled task, the stacks sampled
// most, with their share of the samples and category.
func topStacks(arms []lab.Arm, all map[string]lab.Stacks) string {
	t := lab.Table{Header: []string{"arm", "task", "share of samples", "category", "state and kernel stack, innermost first"}}
	for _, a := range arms {
		for _, task := range []string{taskSync, taskBg, taskJournl} {
			s, ok := all[a.Name+"\x00"+task]
			if !ok || s.N == 0 {
				continue
			}
			keys, counts := s.Top(6)
			for i, k := range keys {
				state, frames := lab.SplitStackKey(k)
				t.Add(a.Name, task, fmt.Sprintf("%.1f%%", float64(counts[i])/float64(s.N)*100), categorize(state, frames),
					string(state)+" "+strings.Join(frames[:min(len(frames), 8)], " < "))
			}
		}
	}
	return t.String()
}
