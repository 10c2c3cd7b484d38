// Package report renders simulation results: the seeds' tables with one
// column per variant, a summary, CSV time series and gonum/plot figures.
// Everything it prints derives from simulated quantities only, so the same
// scenario and seed give byte-identical output.
package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/memcgd/memcgd/sim/kernel"
	"github.com/memcgd/memcgd/sim/run"
	"github.com/memcgd/memcgd/sim/scenario"
)

// Table is a titled grid of cells.
type Table struct {
	Title  string
	Header []string
	Rows   [][]string
}

// Write prints t as a Markdown table with aligned columns.
func (t Table) Write(w io.Writer) error {
	width := make([]int, len(t.Header))
	for i, h := range t.Header {
		width[i] = len(h)
	}
	for _, r := range t.Rows {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	var b strings.Builder
	if t.Title != "" {
		fmt.Fprintf(&b, "%s\n\n", t.Title)
	}
	line := func(cells []string) {
		b.WriteString("|")
		for i, c := range cells {
			fmt.Fprintf(&b, " %-*s |", width[i], c)
		}
		b.WriteString("\n")
	}
	line(t.Header)
	b.WriteString("|")
	for _, wd := range width {
		b.WriteString(strings.Repeat("-", wd+2) + "|")
	}
	b.WriteString("\n")
	for _, r := range t.Rows {
		line(r)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func mib(pages int64) string { return fmt.Sprintf("%.1f", float64(pages)*kernel.PageSize/(1<<20)) }

func secs(t kernel.Time) string { return fmt.Sprintf("%.2f", t.Seconds()) }

func mbps(bps float64) string { return fmt.Sprintf("%.1f", bps/1e6) }

func pct(v, base float64) string {
	if base == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", (v/base-1)*100)
}

func workload(r *run.Result, name string) run.WorkloadResult {
	for _, w := range r.Workloads {
		if w.Name == name {
			return w
		}
	}
	return run.WorkloadResult{}
}

// kswapdSteal is seed 001's kswapd_steal: the seed kernel's per-cgroup
// kswapd, or memcgd's background reclaim through memory.reclaim.
func split(c kernel.SeedCounters) (ksteal, kscan, dsteal, dscan int64) {
	return c.KswapdSteal + c.ProactiveSteal, c.KswapdPgscan + c.ProactiveScan,
		c.PgPgsteal - c.ProactiveSteal, c.PgScan - c.ProactiveScan
}

// Tables builds the scenario's report tables.
func Tables(sc *scenario.Scenario, rs []*run.Result) []Table {
	header := []string{"quantity"}
	for _, r := range rs {
		header = append(header, r.Variant)
	}
	row := func(name string, f func(r *run.Result) string) []string {
		out := []string{name}
		for _, r := range rs {
			out = append(out, f(r))
		}
		return out
	}
	w := sc.Report.Workload
	base := workload(rs[0], w).Throughput()
	after := ""
	if sc.Report.Warmup > 0 {
		after = fmt.Sprintf(" after %v", sc.Report.Warmup)
	}
	var t Table
	switch sc.Report.Table {
	case scenario.KernelSeed001:
		t = Table{Title: fmt.Sprintf("Seed 001's table: %s in %s (memory.stat of the cgroup, pages)", w, sc.Report.Focus), Header: header}
		t.Rows = [][]string{
			row("pgpgin", func(r *run.Result) string { return fmt.Sprint(r.FocusCounts.Pgpgin) }),
			row("pgpgout", func(r *run.Result) string { return fmt.Sprint(r.FocusCounts.Pgpgout) }),
			row("kswapd_steal", func(r *run.Result) string { a, _, _, _ := split(r.FocusCounts); return fmt.Sprint(a) }),
			row("pg_pgsteal", func(r *run.Result) string { _, _, c, _ := split(r.FocusCounts); return fmt.Sprint(c) }),
			row("kswapd_pgscan", func(r *run.Result) string { _, b, _, _ := split(r.FocusCounts); return fmt.Sprint(b) }),
			row("pg_scan", func(r *run.Result) string { _, _, _, d := split(r.FocusCounts); return fmt.Sprint(d) }),
			row("pgrefill", func(r *run.Result) string { return fmt.Sprint(r.FocusCounts.Pgrefill) }),
			row("pgoutrun", func(r *run.Result) string { return fmt.Sprint(r.FocusCounts.Pgoutrun) }),
			row("allocstall", func(r *run.Result) string { return fmt.Sprint(r.FocusCounts.Allocstall) }),
			row("real (s)", func(r *run.Result) string { x := workload(r, w); return secs(x.Finish - x.Start) }),
			row(w+" memory stall (s)", func(r *run.Result) string { return secs(workload(r, w).Stall) }),
			row(w+" MB/s", func(r *run.Result) string { return mbps(workload(r, w).Throughput()) }),
		}
	case scenario.KernelSeed004:
		t = Table{Title: "Seed 004's comparison: dd throughput by cgroup, and the limited cgroup's dirty pages", Header: header}
		for _, wl := range sc.Workloads {
			name := wl.Name
			t.Rows = append(t.Rows, row(fmt.Sprintf("%s in %s (MB/s)", name, wl.Cgroup), func(r *run.Result) string {
				return mbps(workload(r, name).Throughput())
			}))
		}
		t.Rows = append(t.Rows,
			row(sc.Report.Focus+" peak dirty+writeback (MiB)", func(r *run.Result) string { return mib(r.PeakDirty) }),
			row(sc.Report.Focus+" p99 dirty+writeback (MiB)", func(r *run.Result) string { return mib(r.P99Dirty) }),
			row(sc.Report.Focus+" dirty limit at the end (MiB)", func(r *run.Result) string {
				return mib(r.Samples[len(r.Samples)-1].Thresh)
			}),
			row(w+" throttle pauses", func(r *run.Result) string { return fmt.Sprint(workload(r, w).Pauses) }),
			row(w+" time paused (s)", func(r *run.Result) string { return secs(workload(r, w).Paused) }),
			row(w+" memory stall (s)", func(r *run.Result) string { return secs(workload(r, w).Stall) }),
		)
	case scenario.KernelSeed000:
		t = Table{Title: fmt.Sprintf("Seed 000's comparison: %s in %s beside the other cgroups' dirty pages", w, sc.Report.Focus), Header: header}
		others := ""
		for _, wl := range sc.Workloads {
			if wl.Kind == scenario.KindDirtier {
				others = wl.Name
			}
		}
		t.Rows = [][]string{
			row(w+" WRITE aggrb (KiB/s)", func(r *run.Result) string {
				return fmt.Sprintf("%.0f", workload(r, w).Throughput()/1024)
			}),
			row(w+" mint (msec)", func(r *run.Result) string {
				x := workload(r, w)
				return fmt.Sprintf("%.0f", float64(x.Finish-x.Start)/float64(kernel.Millisecond))
			}),
			row("vs "+rs[0].Variant, func(r *run.Result) string { return pct(workload(r, w).Throughput(), base) }),
			row("others' pages dirtied (MiB)", func(r *run.Result) string { return mib(workload(r, others).Counts.Dirtied) }),
			row("others' pages written out (MiB)", func(r *run.Result) string { return mib(workload(r, others).Counts.Written) }),
			row("reclaim's full flushes (wakeup_flusher_threads)", func(r *run.Result) string { return fmt.Sprint(r.FullFlushes) }),
			row("memcg-first write-outs", func(r *run.Result) string { return fmt.Sprint(r.MemcgFirst) }),
			row(w+" memory stall (s)", func(r *run.Result) string { return secs(workload(r, w).Stall) }),
			row(w+" time paused (s)", func(r *run.Result) string { return secs(workload(r, w).Paused) }),
			row(w+" MiB/s", func(r *run.Result) string { return fmt.Sprintf("%.1f", workload(r, w).Throughput()/(1<<20)) }),
		}
	case scenario.TableNoisyNeighbour:
		t = noisyNeighbour(sc, rs, header, row)
	default:
		t = Table{Title: "Summary", Header: header}
		for _, wl := range sc.Workloads {
			name := wl.Name
			t.Rows = append(t.Rows,
				row(name+" MiB/s", func(r *run.Result) string {
					return fmt.Sprintf("%.1f", workload(r, name).Throughput()/(1<<20))
				}),
				row(name+" memory stall (s)", func(r *run.Result) string { return secs(workload(r, name).Stall) }),
				row(name+" time paused (s)", func(r *run.Result) string { return secs(workload(r, name).Paused) }))
		}
		t.Rows = append(t.Rows,
			row(sc.Report.Focus+" peak dirty+writeback (MiB)", func(r *run.Result) string { return mib(r.PeakDirty) }),
			row(sc.Report.Focus+" p99 dirty+writeback"+after+" (MiB)", func(r *run.Result) string { return mib(r.P99Dirty) }),
			row(sc.Report.Focus+" charges over the limit (v1 failcnt, v2 events max)", func(r *run.Result) string {
				if sc.Machine.Cgroup == 1 {
					return fmt.Sprint(r.FocusCounts.Failcnt)
				}
				return fmt.Sprint(r.FocusCounts.EventsMax)
			}))
		if sc.Report.Warmup > 0 {
			t.Rows = append(t.Rows, row(fmt.Sprintf("%s peak dirty+writeback in the first %v (MiB)", sc.Report.Focus, sc.Report.Warmup),
				func(r *run.Result) string { return mib(r.WarmupPeakDirty) }))
		}
		if hasDirtyBytes(rs) {
			t.Rows = append(t.Rows, row(sc.Report.Focus+" p99 dirty+writeback"+after+" / dirty_bytes", func(r *run.Result) string {
				if r.DirtyBytes == 0 {
					return "—"
				}
				return fmt.Sprintf("%.2f", float64(r.P99Dirty*kernel.PageSize)/float64(r.DirtyBytes))
			}))
		}
	}
	out := []Table{t}
	if hasDaemon(rs) {
		d := Table{Title: "memcgd's activity", Header: header}
		dr := func(name string, f func(*run.DaemonStats) string) []string {
			return row(name, func(r *run.Result) string {
				if r.Daemon == nil {
					return "—"
				}
				return f(r.Daemon)
			})
		}
		d.Rows = [][]string{
			dr("controller steps", func(s *run.DaemonStats) string { return fmt.Sprint(s.Steps) }),
			dr("targeted write-outs", func(s *run.DaemonStats) string { return fmt.Sprint(s.WriteOuts) }),
			dr("full flushes", func(s *run.DaemonStats) string { return fmt.Sprint(s.Flushes) }),
			dr("reclaimed (MiB)", func(s *run.DaemonStats) string { return fmt.Sprintf("%.1f", float64(s.Reclaimed)/(1<<20)) }),
			dr("freezes (by RunFor)", func(s *run.DaemonStats) string { return fmt.Sprintf("%d (%d)", s.Freezes, s.DriverFreezes) }),
			dr("time frozen (s)", func(s *run.DaemonStats) string { return fmt.Sprintf("%.2f", s.Frozen.Seconds()) }),
			dr("watcher wake-ups", func(s *run.DaemonStats) string { return fmt.Sprint(s.Wakeups) }),
		}
		d.Rows = append(d.Rows, row("steps per simulated s", func(r *run.Result) string {
			if r.Daemon == nil || r.End <= 0 {
				return "—"
			}
			return fmt.Sprintf("%.0f", float64(r.Daemon.Steps)/r.End.Seconds())
		}), row("pace writes per simulated s", func(r *run.Result) string {
			if r.Daemon == nil || r.End <= 0 {
				return "—"
			}
			return fmt.Sprintf("%.0f", float64(r.Daemon.PaceSets)/r.End.Seconds())
		}))
		out = append(out, d)
	}
	return out
}

// noisyNeighbour is E4's table: every workload's throughput and time
// stopped by cause, the sleepers' wake-up lateness, the WALs' commit
// latency, the focus cgroup's dirty pages and the cpu groups' throttling.
func noisyNeighbour(sc *scenario.Scenario, rs []*run.Result, header []string, row func(string, func(*run.Result) string) []string) Table {
	t := Table{Title: fmt.Sprintf("Noisy neighbour: the writer in %s beside its victims (stopped: dirty pause / frozen / CPU-throttled / reclaim / fdatasync)", sc.Report.Focus), Header: header}
	ms := func(d kernel.Time) string { return fmt.Sprintf("%.2f", float64(d)/float64(kernel.Millisecond)) }
	pcts := func(l []float64) func(r *run.Result, name string) string {
		return func(r *run.Result, name string) string {
			lat := workload(r, name).Latencies
			out := make([]string, len(l))
			for i, p := range l {
				out[i] = ms(lat.Percentile(p))
			}
			return strings.Join(out, " / ")
		}
	}
	for _, wl := range sc.Workloads {
		name := wl.Name
		switch wl.Kind {
		case scenario.KindSleeper:
			f := pcts([]float64{50, 99, 100})
			t.Rows = append(t.Rows,
				row(name+" wake-up lateness p50 / p99 / max (ms)", func(r *run.Result) string { return f(r, name) }),
				row(name+" wake-ups", func(r *run.Result) string { return fmt.Sprint(len(workload(r, name).Latencies)) }))
		case scenario.KindWAL:
			f := pcts([]float64{50, 99, 99.9, 100})
			t.Rows = append(t.Rows,
				row(name+" commit latency p50 / p99 / p99.9 / max (ms)", func(r *run.Result) string { return f(r, name) }),
				row(name+" commits (write + fdatasync)", func(r *run.Result) string { return fmt.Sprint(len(workload(r, name).Latencies)) }))
		default:
			t.Rows = append(t.Rows, row(name+" MiB/s", func(r *run.Result) string {
				return fmt.Sprintf("%.1f", workload(r, name).Throughput()/(1<<20))
			}))
		}
		t.Rows = append(t.Rows, row(name+" stopped (s)", func(r *run.Result) string {
			st := workload(r, name).Stopped
			return strings.Join([]string{secs(st[kernel.StopDirtyPause]), secs(st[kernel.StopFrozen]),
				secs(st[kernel.StopCPUThrottled]), secs(st[kernel.StopReclaim]), secs(st[kernel.StopSync])}, " / ")
		}))
	}
	t.Rows = append(t.Rows,
		row(sc.Report.Focus+" peak dirty+writeback (MiB)", func(r *run.Result) string { return mib(r.PeakDirty) }),
		row(sc.Report.Focus+" p99 dirty+writeback (MiB)", func(r *run.Result) string { return mib(r.P99Dirty) }))
	for i, g := range sc.CPUGroups {
		t.Rows = append(t.Rows, row(g.Path+" cpu.stat nr_throttled / throttled (s)", func(r *run.Result) string {
			st := r.CPUGroups[i]
			return fmt.Sprintf("%d / %s", st.NrThrottled, secs(st.ThrottledTime))
		}))
	}
	return t
}

func hasDirtyBytes(rs []*run.Result) bool {
	for _, r := range rs {
		if r.DirtyBytes != 0 {
			return true
		}
	}
	return false
}

func hasDaemon(rs []*run.Result) bool {
	for _, r := range rs {
		if r.Daemon != nil {
			return true
		}
	}
	return false
}

// Write prints the scenario's header and tables.
func Write(w io.Writer, sc *scenario.Scenario, rs []*run.Result) error {
	fmt.Fprintf(w, "# %s (seed %d, cgroup v%d)\n\n", sc.Name, sc.Seed, sc.Machine.Cgroup)
	if sc.Description != "" {
		fmt.Fprintf(w, "%s\n\n", sc.Description)
	}
	for _, t := range Tables(sc, rs) {
		if err := t.Write(w); err != nil {
			return err
		}
	}
	return nil
}

// WriteStat prints, per variant, the focus cgroup's memory.stat (in the
// machine's hierarchy format) and /proc/vmstat at the end of the run.
func WriteStat(w io.Writer, rs []*run.Result) error {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "## %s: memory.stat of %s\n\n```\n%s```\n\n", r.Variant, r.Focus, kernel.Format(r.FocusStat))
		lines := make([]kernel.StatLine, 0, len(r.Vmstat))
		for _, v := range r.Vmstat {
			lines = append(lines, kernel.StatLine{Key: v.Name, Value: v.Value})
		}
		fmt.Fprintf(&b, "## %s: /proc/vmstat\n\n```\n%s```\n\n", r.Variant, kernel.Format(lines))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
