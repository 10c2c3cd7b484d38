// Command e1 is seed 001's experiment (per-cgroup background reclaim, Ying
// Han 2011), scaled to one machine: a sequential writer in a memory cgroup
// with a small limit, once paced and once unpaced, each without and then
// with memcgd, and the seed's memory.stat table for each.
//
//	go run ./experiments/e1 [-size 2G] [-limit 100M] [-rate 100M] [-runs 3] [-modes unpaced] [-arms stock,memcgd,fallback]
//	go run ./experiments/e1 -vm v2     # in a cgroup v2 test VM, sizes scaled to it
//
// The seed wrote 20 GB under a 500 MB limit and compared pgpgin, pgpgout,
// kswapd_steal, pg_pgsteal, kswapd_pgscan, pg_scan, pgrefill, pgoutrun,
// allocstall and the run's real/user/sys time. A v1 kernel has no
// per-cgroup reclaim counters, v2 has no pgpgin/pgpgout: the table says
// which figure stands in for which, and prints n/a where nothing does. The writer's memory stall is
// the "some" total of the memory PSI of its cgroup's unified-hierarchy
// mirror (kernel/sched/psi.c; reclaim on its behalf is a memstall,
// mm/vmscan.c try_to_free_mem_cgroup_pages).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/memcgd/memcgd/experiments/internal/lab"
	"github.com/memcgd/memcgd/internal/stall"
	"github.com/memcgd/memcgd/memcg"
)

func main() {
	// In the VM: a 50 MB/s disk and a guest several times slower than
	// the host, so a quarter of the data, paced below the disk's rate.
	f := lab.Flags{VMDefaults: map[string]string{"size": "512M", "limit": "100M", "rate": "20M"}, ExtraArms: []lab.Arm{lab.SelfPaced}}
	f.Register(flag.CommandLine)
	size, limit, rate := lab.Size(2<<30), lab.Size(100<<20), lab.Size(100<<20)
	flag.Var(&size, "size", "bytes the writer writes")
	flag.Var(&limit, "limit", "memory limit of the writer's cgroup")
	flag.Var(&rate, "rate", "rate of the paced writer, bytes per second")
	modes := flag.String("modes", "paced,unpaced", "writer modes to run, comma-separated: paced, unpaced")
	defaults := flag.String("defaults", "dirty_ratio: 10, dirty_background_ratio: 5, min_free_kbytes: auto, writeback_first: true",
		"memcgd's config defaults, as a YAML flow mapping's contents (the default is the embedded policy's)")
	flag.Parse()
	e := experiment{size: uint64(size), limit: uint64(limit), rate: uint64(rate), defaults: *defaults}
	for _, m := range strings.Split(*modes, ",") {
		switch m {
		case "paced", "unpaced":
			e.modes = append(e.modes, m)
		default:
			fmt.Fprintf(os.Stderr, "-modes: invalid mode %q: allowed paced, unpaced\n", m)
			os.Exit(2)
		}
	}
	lab.Main("./experiments/e1", f, e.run)
}

type experiment struct {
	size, limit, rate uint64
	modes             []string
	defaults          string
}

// arm is what one run of the writer measured.
type arm struct {
	before, after memcg.Stat
	res           lab.WriterResult
	use           lab.Usage
	daemon        lab.DaemonResult
	samples       lab.Stats        // every 10 ms during the run
	pressure      lab.Pressure     // rise of the PSI totals during the run
	disk          lab.DiskActivity // the device during the write phase
	limit         uint64           // the limit the lab set
	hostCPU       time.Duration    // the host's busy CPU time during the write phase (lab.HostCPU)
	stalls        stall.Stalls     // the machine's stalls during the write phase (stall.Probe)
}

func (e experiment) run(ctx context.Context, b *lab.Bench) error {
	fmt.Printf("Writer: %s sequentially in 1 MiB writes into a cgroup limited to %s; paced at %s/s or unpaced.\n"+
		"memcgd config:\n\n```yaml\n%s```\n\n",
		memcg.FormatSize(e.size), memcg.FormatSize(e.limit), memcg.FormatSize(e.rate), e.config(b))
	names := armNames(b.Arms)
	medians := map[string]*lab.Medians{}
	var targets lab.Targets
	for _, mode := range e.modes {
		medians[mode] = lab.NewMedians(names...)
	}
	for run := 1; run <= b.Runs; run++ {
		for _, mode := range e.modes {
			rate := uint64(0)
			if mode == "paced" {
				rate = e.rate
			}
			arms := make([]arm, len(b.Arms))
			for _, i := range lab.Order(run, len(b.Arms)) {
				a, err := e.arm(ctx, b, fmt.Sprintf("%s-%d-%s", mode, run, b.Arms[i].Name), rate, b.Arms[i])
				if err != nil {
					return err
				}
				arms[i] = a
			}
			t, m := lab.NewCompare(names...), medians[mode]
			rows(t, m, arms)
			fmt.Printf("### %s, run %d (%s)\n\n%s\n", mode, run, lab.OrderText(run, b.Arms), t)
			addTargets(&targets, mode, b.Arms, arms)
		}
	}
	for _, mode := range e.modes {
		fmt.Printf("### %s, medians of %d runs\n\n%s\n", mode, b.Runs, medians[mode])
	}
	fmt.Printf("### Targets (unpaced: issues 7 and 16; paced: issue 3), medians of %d runs\n\n%s\n", b.Runs, targets.String())
	return nil
}

// armNames are the arms' names, for the tables' columns.
func armNames(arms []lab.Arm) []string {
	var out []string
	for _, a := range arms {
		out = append(out, a.Name)
	}
	return out
}

// addTargets records one run's figures for the targets: issue 16's for
// the unpaced writer (it kept issue 7's stall and failcnt, and the daemon's
// whole CPU is issue 7's), issue 3's for the paced one. Ratios and
// reductions are taken against the stock arm of the same run.
func addTargets(t *lab.Targets, mode string, arms []lab.Arm, a []arm) {
	stock := a[0]
	for i := 1; i < len(arms); i++ {
		if arms[i].SelfPaced {
			continue // no memcgd: its figures are in the run's table
		}
		name, x := arms[i].Name, a[i]
		tp := x.res.Throughput() / stock.res.Throughput()
		stall := reduction(float64(stock.pressure.Memory), float64(x.pressure.Memory))
		fail := reduction(failcnt(stock), failcnt(x))
		if mode == "unpaced" {
			if arms[i].Name == lab.Fallback.Name {
				t.Add("E1 unpaced, fallback: throughput ≥ 0.90 × stock", name, "%.3f", func(v float64) bool { return v >= 0.90 }, tp)
				continue
			}
			t.Add("E1 unpaced: throughput ≥ 1.0 × stock", name, "%.3f", func(v float64) bool { return v >= 1 }, tp)
			t.Add("E1 unpaced: writer memory stall (PSI some) ≥ 90% lower", name, "%.1f%%", func(v float64) bool { return v >= 90 }, stall)
			t.Add("E1 unpaced: failcnt ≥ 90% lower", name, "%.1f%%", func(v float64) bool { return v >= 90 }, fail)
			t.Add("E1 unpaced: daemon CPU during the run ≤ 10% of one core", name, "%.1f%%", func(v float64) bool { return v <= 10 }, busy(x))
			t.Add("E1 unpaced: daemon CPU besides write-out, flush and reclaim calls ≤ 5% of one core", name, "%.1f%%",
				func(v float64) bool { return v <= 5 }, busy(x)-x.daemon.KernelWorkPercent())
			t.Add("E1 unpaced: host CPU per GiB written ≤ 1.1 × stock", name, "%.3f",
				func(v float64) bool { return v <= 1.1 }, hostPerGiB(x)/hostPerGiB(stock))
			continue
		}
		t.Add("E1 paced: writer memory stall ≥ 99% lower", name, "%.1f%%", func(v float64) bool { return v >= 99 }, stall)
		t.Add("E1 paced: failcnt ≥ 99% lower", name, "%.1f%%", func(v float64) bool { return v >= 99 }, fail)
		t.Add("E1 paced: throughput within 2% of stock", name, "%.3f", func(v float64) bool { return v >= 0.98 && v <= 1.02 }, tp)
	}
}

// reduction is how much lower with is than stock, in percent of stock
// (100 when with is 0); NaN when stock is 0.
func reduction(stock, with float64) float64 {
	if stock == 0 {
		return math.NaN()
	}
	return (stock - with) / stock * 100
}

// failcnt is the rise of the cgroup's failed charges during the run:
// memory.failcnt on v1, memory.events max on v2.
func failcnt(a arm) float64 {
	if a.after.Counters.HasEvents {
		return float64(a.after.Counters.EventsMax - a.before.Counters.EventsMax)
	}
	return float64(a.after.Counters.Failcnt - a.before.Counters.Failcnt)
}

// hostPerGiB is the host's busy CPU time during the write phase per GiB
// written, in CPU-seconds; NaN when not measured.
func hostPerGiB(a arm) float64 {
	if a.hostCPU <= 0 || a.res.Bytes == 0 {
		return math.NaN()
	}
	return a.hostCPU.Seconds() / (float64(a.res.Bytes) / (1 << 30))
}

// busy is the daemon's CPU use during the writer's run in percent of one
// core; NaN when not measured.
func busy(a arm) float64 {
	if a.daemon.Busy < 0 {
		return math.NaN()
	}
	return a.daemon.Busy * 100
}

// budget is the self-paced writer's budget: dirty_ratio 10 of the limit,
// about the dirty limit memcgd's default policy gives the cgroup (its
// dirtyable memory is its page cache plus its headroom, nearly the whole
// limit for this writer).
func (e experiment) budget() uint64 { return e.limit / 10 }

// config is memcgd's config: -defaults over the lab's subtree.
func (e experiment) config(b *lab.Bench) string {
	return fmt.Sprintf("version: 1\nmanage: {under: %s, limited_only: true}\ndefaults: {%s}\n", b.Root.Path, e.defaults)
}

// arm runs the writer once in a fresh cgroup, with or without memcgd.
func (e experiment) arm(ctx context.Context, b *lab.Bench, name string, rate uint64, with lab.Arm) (a arm, err error) {
	if err := lab.DropCaches(); err != nil {
		return a, err
	}
	c, err := b.Cgroup(nil, "writer-"+name, lab.CgroupOptions{Limit: e.limit, Mirror: true})
	if err != nil {
		return a, err
	}
	d, err := b.StartArm(ctx, with, e.config(b), c)
	if err != nil {
		return a, err
	}
	if a.before, err = b.Observe(c); err != nil {
		return a, err
	}
	p0, err := c.Pressure()
	if err != nil {
		return a, err
	}
	w := lab.Writer{Bin: b.Writer, File: b.File("e1-" + name), Size: e.size, Chunk: 1 << 20, Rate: rate}
	if with.SelfPaced {
		w.Budget = e.budget()
	}
	probe, err := stall.Start()
	if err != nil {
		return a, err
	}
	sm := b.Sample(10*time.Millisecond, c)
	d.BusyStart()
	disk0 := b.Disk()
	host0, herr := lab.HostCPU()
	a.res, a.use, err = w.Run(ctx, c)
	host1, herr1 := lab.HostCPU()
	a.disk = b.Disk().Sub(disk0)
	d.BusyEnd()
	if herr == nil && herr1 == nil {
		a.hostCPU = host1 - host0
	}
	stalls, perr := probe.Stop()
	samples, serr := sm.Stop()
	if err = errors.Join(err, perr); err != nil {
		return a, err
	}
	a.stalls = stalls
	if serr != nil {
		return a, fmt.Errorf("sample %s: %w", c.Path, serr)
	}
	a.samples, a.limit = samples.Stats[0], e.limit
	if a.after, err = b.Observe(c); err != nil {
		return a, err
	}
	p1, err := c.Pressure()
	if err != nil {
		return a, err
	}
	a.pressure = p1.Sub(p0)
	if a.daemon, err = b.EndArm(ctx, d, c); err != nil {
		return a, err
	}
	if err := b.Remove(c); err != nil {
		return a, err
	}
	return a, os.Remove(w.File)
}

// reclaimed is the pages reclaimed from the writer's cgroup during a run:
// every page it wrote was charged once, and what is not in its page cache
// at the end was reclaimed. v1's pgpgin and pgpgout cannot give this: they
// count charge events, one per folio (mm/memcontrol-v1.c,
// memcg1_charge_statistics), and ext4 caches large folios on this kernel.
func reclaimed(a arm) float64 {
	grew := int64(a.after.File) - int64(a.before.File)
	return float64(max(int64(a.res.Bytes)-grew, 0) / memcg.PageSize)
}

// rows adds the seed's rows for the arms (stock first) to t, and to m for
// the medians over the runs.
func rows(t *lab.Compare, m *lab.Medians, a []arm) {
	num := func(name, format string, f func(arm) float64) {
		v := make([]float64, len(a))
		for i := range a {
			v[i] = f(a[i])
		}
		t.Num(name, format, v...)
		m.Num(name, format, v...)
	}
	text := func(name string, f func(arm) string) {
		v := make([]string, len(a))
		for i := range a {
			v[i] = f(a[i])
		}
		t.Text(name, v...)
	}
	delta := func(f func(memcg.Stat) uint64) func(arm) float64 {
		return func(a arm) float64 { return float64(f(a.after) - f(a.before)) }
	}
	field := func(name string) func(arm) float64 {
		return func(a arm) float64 { return float64(a.daemon.Fields[name]) }
	}
	steal := field("kswapd_steal")
	stock := a[0]

	text("dirty-tracking path (memcgd stat dirty_tracker)", func(a arm) string {
		if a.daemon.Fields == nil {
			return "—"
		}
		return a.daemon.Tracker()
	})
	if stock.after.Counters.HasPgpg {
		num("pgpgin (charge events, memory.stat Δ)", "%.0f", delta(func(s memcg.Stat) uint64 { return s.Counters.Pgpgin }))
		num("pgpgout (uncharge events, memory.stat Δ)", "%.0f", delta(func(s memcg.Stat) uint64 { return s.Counters.Pgpgout }))
	} else {
		text("pgpgin, pgpgout", func(a arm) string { return "n/a (v2 memory.stat has none)" })
	}
	num("reclaimed (pages): written − Δcache", "%.0f", reclaimed)
	num("kswapd_steal (pages; memcgd's background reclaim, as its usage fall)", "%.0f", steal)
	num("direct reclaim, est. (pages): reclaimed − kswapd_steal", "%.0f", func(a arm) float64 { return max(reclaimed(a)-steal(a), 0) })
	if stock.after.Counters.HasReclaim {
		// v2 memory.stat (mm/memcontrol.c memory_stat_format): reclaim
		// not done by kswapd counts as direct, and that includes
		// memcgd's writes to memory.reclaim (try_to_free_mem_cgroup_pages).
		for _, r := range []struct {
			name string
			f    func(memcg.Stat) uint64
		}{
			{"pg_pgsteal → pgsteal_direct Δ (limit reclaim + memcgd's memory.reclaim)", func(s memcg.Stat) uint64 { return s.Counters.PgstealDirect }},
			{"pg_scan → pgscan_direct Δ", func(s memcg.Stat) uint64 { return s.Counters.PgscanDirect }},
			{"pgsteal_kswapd Δ (the kernel's global kswapd)", func(s memcg.Stat) uint64 { return s.Counters.PgstealKswapd }},
			{"kswapd_pgscan → pgscan_kswapd Δ", func(s memcg.Stat) uint64 { return s.Counters.PgscanKswapd }},
			{"pgrefill Δ", func(s memcg.Stat) uint64 { return s.Counters.Pgrefill }},
		} {
			num(r.name, "%.0f", delta(r.f))
		}
	} else {
		text("pg_pgsteal, pg_scan, kswapd_pgscan, pgrefill", func(a arm) string { return "n/a (v1 has no per-cgroup reclaim counters)" })
	}
	num("pgoutrun (memcgd's background reclaim runs)", "%.0f", field("pgoutrun"))
	if stock.after.Counters.HasEvents {
		// memory.events max: times usage hit memory.max and reclaim ran
		// on the charging task's behalf (mm/memcontrol.c try_charge).
		num("allocstall → memory.events max Δ (charges that hit the limit)", "%.0f", failcnt)
	} else {
		num("allocstall → memory.failcnt Δ (charges that hit the limit)", "%.0f", failcnt)
	}
	num("writer memory stall, PSI some (ms)", "%.1f", func(a arm) float64 { return float64(a.pressure.Memory) / 1e3 })
	num("writer memory stall, PSI full (ms)", "%.1f", func(a arm) float64 {
		return delta(func(s memcg.Stat) uint64 { return s.Pressure.FullTotal })(a) / 1e3
	})
	num("writer CPU wait, PSI cpu some (ms)", "%.1f", func(a arm) float64 { return float64(a.pressure.CPU) / 1e3 })
	num("writer I/O wait, PSI io some (ms)", "%.1f", func(a arm) float64 { return float64(a.pressure.IO) / 1e3 })
	free := func(a arm) lab.Series {
		return a.samples.Series(func(s memcg.Stat) uint64 { return a.limit - min(s.Usage, a.limit) })
	}
	lowered := func(a arm) lab.Series { return a.samples.Series(func(s memcg.Stat) uint64 { return s.Limit }) }
	num("free under the limit set, median of 10 ms samples (MiB)", "%.2f", func(a arm) float64 { return lab.MiB(free(a).Percentile(50)) })
	num("samples with less than 1 MiB free (%)", "%.1f", func(a arm) float64 { return free(a).Below(1 << 20) })
	num("samples with the limit lowered by a squeeze (%)", "%.1f", func(a arm) float64 { return lowered(a).Below(a.limit) })
	num("real (s)", "%.2f", func(a arm) float64 { return a.use.Wall.Seconds() })
	num("user (s)", "%.2f", func(a arm) float64 { return a.use.User.Seconds() })
	num("sys (s)", "%.2f", func(a arm) float64 { return a.use.Sys.Seconds() })
	num("throughput (MiB/s, write phase)", "%.1f", func(a arm) float64 { return lab.MiB(uint64(a.res.Throughput())) })
	// A throttle that holds the limit runs the writer at the device's
	// speed at best: busy below 100 % is device time it left unused.
	num("device busy during the write phase (%)", "%.1f", func(a arm) float64 { return a.disk.BusyPercent() })
	num("machine stalls: every CPU's 1 ms sleeper over 5 ms late at once", "%.0f", func(a arm) float64 { return float64(a.stalls.Count) })
	num("  time in them (ms)", "%.1f", func(a arm) float64 { return float64(a.stalls.Total) / 1e6 })
	num("device write rate during the write phase (MiB/s)", "%.1f", func(a arm) float64 { return a.disk.WriteMiBps() })
	num("memcgd targeted write-outs", "%.0f", field("writeout_targeted"))
	num("memcgd: of them spaced for a syncing neighbour (--write-out-yield)", "%.0f", field("writeout_targeted_yielded"))
	num("memcgd full flushes", "%.0f", field("writeout_flush"))
	num("memcgd throttle pauses", "%.0f", field("throttle_pauses"))
	num("memcgd time paused (ms)", "%.0f", func(a arm) float64 { return field("throttle_paused_us")(a) / 1e3 })
	num("memcgd time its pace held the writer (ms; summed over CPUs)", "%.0f", func(a arm) float64 { return field("throttle_pace_held_us")(a) / 1e3 })
	num("memcgd CPU during the writer's run (% of one core)", "%.1f", busy)
	num("  of it in write-out, flush and reclaim calls (% of one core)", "%.1f", func(a arm) float64 { return a.daemon.KernelWorkPercent() })
	num("memcgd steps (looks at a cgroup) during the writer's run, a second", "%.0f", func(a arm) float64 { return a.daemon.StepRate() })
	num("memcgd: its threads put on a CPU per step (about one a thread wake-up)", "%.1f", func(a arm) float64 { return a.daemon.RunsPerStep() })
	for _, call := range []string{"observe", "refresh", "watch", "set pace", "reclaim", "write out"} {
		text("memcgd: "+call+" calls during the writer's run (a second; CPU each)", func(a arm) string { return a.daemon.CallText(call) })
	}
	num("memcgd: garbage collections a second during the writer's run", "%.1f", func(a arm) float64 { return a.daemon.GCRate() })
	num("memcgd: bytes allocated per step during the writer's run", "%.0f", func(a arm) float64 { return a.daemon.AllocatedPerStep() })
	num("memcgd: its loop's wake-ups for its timers during the writer's run", "%.0f", func(a arm) float64 { return a.daemon.TimerWakeUps() })
	num("  how late they came, p50 (ms; memcgd_timer_lateness_seconds)", "%.2f", func(a arm) float64 { return a.daemon.LateP50() })
	num("  p99 (ms)", "%.2f", func(a arm) float64 { return a.daemon.LateP99() })
	num("host CPU during the write phase, per GiB written (CPU-s; all CPUs, all tasks)", "%.3f", hostPerGiB)
	num("memcgd CPU, user+sys over its life (s)", "%.2f", func(a arm) float64 { return (a.daemon.Usage.User + a.daemon.Usage.Sys).Seconds() })
}
