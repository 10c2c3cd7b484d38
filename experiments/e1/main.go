// Command e1 is seed 001's experiment (per-cgroup background reclaim, Ying
// Han 2011), scaled to one machine: a sequential writer in a memory cgroup
// with a small limit, once paced and once unpaced, each without and then
// with memcgd, and the seed's memory.stat table for each.
//
//	go run ./experiments/e1 [-size 2G] [-limit 100M] [-rate 100M] [-runs 2]
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
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/memcgd/memcgd/experiments/internal/lab"
	"github.com/memcgd/memcgd/memcg"
)

func main() {
	// In the VM: a 50 MB/s disk and a guest several times slower than
	// the host, so a quarter of the data, paced below the disk's rate.
	f := lab.Flags{VMDefaults: map[string]string{"size": "512M", "limit": "100M", "rate": "20M"}}
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
	samples       lab.Stats    // every 10 ms during the run
	pressure      lab.Pressure // rise of the PSI totals during the run
	limit         uint64       // the limit the lab set
}

func (e experiment) run(ctx context.Context, b *lab.Bench) error {
	fmt.Printf("Writer: %s sequentially in 1 MiB writes into a cgroup limited to %s; paced at %s/s or unpaced.\n"+
		"memcgd config:\n\n```yaml\n%s```\n\n",
		memcg.FormatSize(e.size), memcg.FormatSize(e.limit), memcg.FormatSize(e.rate), e.config(b))
	for run := 1; run <= b.Runs; run++ {
		for _, mode := range e.modes {
			rate := uint64(0)
			if mode == "paced" {
				rate = e.rate
			}
			var arms [2]arm // without, with
			for _, with := range lab.Order(run) {
				a, err := e.arm(ctx, b, fmt.Sprintf("%s-%d-%v", mode, run, with), rate, with)
				if err != nil {
					return err
				}
				if with {
					arms[1] = a
				} else {
					arms[0] = a
				}
			}
			fmt.Printf("### %s, run %d (%s)\n\n%s\n", mode, run, lab.FirstArm(run), table(arms[0], arms[1]))
		}
	}
	return nil
}

// config is memcgd's config: -defaults over the lab's subtree.
func (e experiment) config(b *lab.Bench) string {
	return fmt.Sprintf("version: 1\nmanage: {under: %s, limited_only: true}\ndefaults: {%s}\n", b.Root.Path, e.defaults)
}

// arm runs the writer once in a fresh cgroup, with or without memcgd.
func (e experiment) arm(ctx context.Context, b *lab.Bench, name string, rate uint64, with bool) (a arm, err error) {
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
	sm := b.Sample(10*time.Millisecond, c)
	a.res, a.use, err = w.Run(ctx, c)
	samples, serr := sm.Stop()
	if err != nil {
		return a, err
	}
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

// table prints the seed's rows for the two arms.
func table(wo, wi arm) string {
	t := lab.NewCompare("without memcgd", "with memcgd")
	delta := func(a arm, f func(memcg.Stat) uint64) float64 { return float64(f(a.after) - f(a.before)) }
	pgpgin := func(s memcg.Stat) uint64 { return s.Counters.Pgpgin }
	pgpgout := func(s memcg.Stat) uint64 { return s.Counters.Pgpgout }
	failcnt := func(s memcg.Stat) uint64 { return s.Counters.Failcnt }
	stallFull := func(s memcg.Stat) uint64 { return s.Pressure.FullTotal }
	steal := float64(wi.daemon.Fields["kswapd_steal"])

	if wo.after.Counters.HasPgpg {
		t.Num("pgpgin (charge events, memory.stat Δ)", "%.0f", delta(wo, pgpgin), delta(wi, pgpgin))
		t.Num("pgpgout (uncharge events, memory.stat Δ)", "%.0f", delta(wo, pgpgout), delta(wi, pgpgout))
	} else {
		t.Text("pgpgin, pgpgout", "n/a (v2 memory.stat has none)", "n/a")
	}
	t.Num("reclaimed (pages): written − Δcache", "%.0f", reclaimed(wo), reclaimed(wi))
	t.Num("kswapd_steal (pages; memcgd's background reclaim, as its usage fall)", "%.0f", 0, steal)
	t.Num("direct reclaim, est. (pages): reclaimed − kswapd_steal", "%.0f", reclaimed(wo), max(reclaimed(wi)-steal, 0))
	if wo.after.Counters.HasReclaim {
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
			t.Num(r.name, "%.0f", delta(wo, r.f), delta(wi, r.f))
		}
	} else {
		t.Text("pg_pgsteal, pg_scan, kswapd_pgscan, pgrefill", "n/a (v1 has no per-cgroup reclaim counters)", "n/a")
	}
	t.Num("pgoutrun (memcgd's background reclaim runs)", "%.0f", 0, float64(wi.daemon.Fields["pgoutrun"]))
	if wo.after.Counters.HasEvents {
		// memory.events max: times usage hit memory.max and reclaim ran
		// on the charging task's behalf (mm/memcontrol.c try_charge).
		eventsMax := func(s memcg.Stat) uint64 { return s.Counters.EventsMax }
		t.Num("allocstall → memory.events max Δ (charges that hit the limit)", "%.0f", delta(wo, eventsMax), delta(wi, eventsMax))
	} else {
		t.Num("allocstall → memory.failcnt Δ (charges that hit the limit)", "%.0f", delta(wo, failcnt), delta(wi, failcnt))
	}
	t.Num("writer memory stall, PSI some (ms)", "%.1f", float64(wo.pressure.Memory)/1e3, float64(wi.pressure.Memory)/1e3)
	t.Num("writer memory stall, PSI full (ms)", "%.1f", delta(wo, stallFull)/1e3, delta(wi, stallFull)/1e3)
	t.Num("writer CPU wait, PSI cpu some (ms)", "%.1f", float64(wo.pressure.CPU)/1e3, float64(wi.pressure.CPU)/1e3)
	t.Num("writer I/O wait, PSI io some (ms)", "%.1f", float64(wo.pressure.IO)/1e3, float64(wi.pressure.IO)/1e3)
	free := func(a arm) lab.Series {
		return a.samples.Series(func(s memcg.Stat) uint64 { return a.limit - min(s.Usage, a.limit) })
	}
	lowered := func(a arm) lab.Series { return a.samples.Series(func(s memcg.Stat) uint64 { return s.Limit }) }
	t.Num("free under the limit set, median of 10 ms samples (MiB)", "%.2f",
		lab.MiB(free(wo).Percentile(50)), lab.MiB(free(wi).Percentile(50)))
	t.Num("samples with less than 1 MiB free (%)", "%.1f", free(wo).Below(1<<20), free(wi).Below(1<<20))
	t.Num("samples with the limit lowered by a squeeze (%)", "%.1f", lowered(wo).Below(wo.limit), lowered(wi).Below(wi.limit))
	t.Num("real (s)", "%.2f", wo.use.Wall.Seconds(), wi.use.Wall.Seconds())
	t.Num("user (s)", "%.2f", wo.use.User.Seconds(), wi.use.User.Seconds())
	t.Num("sys (s)", "%.2f", wo.use.Sys.Seconds(), wi.use.Sys.Seconds())
	t.Num("throughput (MiB/s, write phase)", "%.1f", lab.MiB(uint64(wo.res.Throughput())), lab.MiB(uint64(wi.res.Throughput())))
	t.Num("memcgd targeted write-outs", "%.0f", 0, float64(wi.daemon.Fields["writeout_targeted"]))
	t.Num("memcgd full flushes", "%.0f", 0, float64(wi.daemon.Fields["writeout_flush"]))
	t.Num("memcgd throttle pauses", "%.0f", 0, float64(wi.daemon.Fields["throttle_pauses"]))
	t.Num("memcgd time paused (ms)", "%.0f", 0, float64(wi.daemon.Fields["throttle_paused_us"])/1e3)
	t.Num("memcgd CPU, user+sys (s)", "%.2f", 0, (wi.daemon.Usage.User + wi.daemon.Usage.Sys).Seconds())
	return t.String()
}
