// Command e1 is seed 001's experiment (per-cgroup background reclaim, Ying
// Han 2011), scaled to one machine: a sequential writer in a memory cgroup
// with a small limit, once paced and once unpaced, each without and then
// with memcgd, and the seed's memory.stat table for each.
//
//	go run ./experiments/e1 [-size 2G] [-limit 100M] [-rate 100M] [-runs 2]
//
// The seed wrote 20 GB under a 500 MB limit and compared pgpgin, pgpgout,
// kswapd_steal, pg_pgsteal, kswapd_pgscan, pg_scan, pgrefill, pgoutrun,
// allocstall and the run's real/user/sys time. A v1 kernel has no
// per-cgroup reclaim counters: the table says which figure stands in for
// which, and prints n/a where nothing does. The writer's memory stall is
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

	"github.com/memcgd/memcgd/experiments/internal/lab"
	"github.com/memcgd/memcgd/memcg"
)

func main() {
	var f lab.Flags
	f.Register(flag.CommandLine)
	size, limit, rate := lab.Size(2<<30), lab.Size(100<<20), lab.Size(100<<20)
	flag.Var(&size, "size", "bytes the writer writes")
	flag.Var(&limit, "limit", "memory limit of the writer's cgroup")
	flag.Var(&rate, "rate", "rate of the paced writer, bytes per second")
	modes := flag.String("modes", "paced,unpaced", "writer modes to run, comma-separated: paced, unpaced")
	flag.Parse()
	e := experiment{size: uint64(size), limit: uint64(limit), rate: uint64(rate)}
	for _, m := range strings.Split(*modes, ",") {
		switch m {
		case "paced", "unpaced":
			e.modes = append(e.modes, m)
		default:
			fmt.Printf("-modes: invalid mode %q: allowed paced, unpaced\n", m)
			return
		}
	}
	lab.Main("./experiments/e1", f, e.run)
}

type experiment struct {
	size, limit, rate uint64
	modes             []string
}

// arm is what one run of the writer measured.
type arm struct {
	before, after memcg.Stat
	res           lab.WriterResult
	use           lab.Usage
	daemon        map[string]uint64 // nil without memcgd
}

func (e experiment) run(ctx context.Context, b *lab.Bench) error {
	fmt.Printf("Writer: %s sequentially in 1 MiB writes into a cgroup limited to %s; paced at %s/s or unpaced.\n"+
		"memcgd: the default policy (dirty_ratio 10, dirty_background_ratio 5, min_free_kbytes auto, writeback_first) "+
		"managing only %s.\n\n",
		memcg.FormatSize(e.size), memcg.FormatSize(e.limit), memcg.FormatSize(e.rate), b.Root.Path)
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

// arm runs the writer once in a fresh cgroup, with or without memcgd.
func (e experiment) arm(ctx context.Context, b *lab.Bench, name string, rate uint64, with bool) (a arm, err error) {
	if err := lab.DropCaches(); err != nil {
		return a, err
	}
	c, err := b.Cgroup(nil, "writer-"+name, lab.CgroupOptions{Limit: e.limit, Mirror: true})
	if err != nil {
		return a, err
	}
	cfg := fmt.Sprintf(`version: 1
manage: {under: %s, limited_only: true}
defaults: {dirty_ratio: 10, dirty_background_ratio: 5, min_free_kbytes: auto, writeback_first: true}
`, b.Root.Path)
	d, err := b.StartArm(ctx, with, cfg, c)
	if err != nil {
		return a, err
	}
	if a.before, err = b.Observe(c); err != nil {
		return a, err
	}
	w := lab.Writer{Bin: b.Writer, File: b.File("e1-" + name), Size: e.size, Chunk: 1 << 20, Rate: rate}
	if a.res, a.use, err = w.Run(ctx, c); err != nil {
		return a, err
	}
	if a.after, err = b.Observe(c); err != nil {
		return a, err
	}
	if a.daemon, err = b.EndArm(ctx, d, c); err != nil {
		return a, err
	}
	if err := b.Remove(c); err != nil {
		return a, err
	}
	return a, os.Remove(w.File)
}

// table prints the seed's rows for the two arms.
func table(wo, wi arm) string {
	t := lab.NewCompare("without memcgd", "with memcgd")
	delta := func(a arm, f func(memcg.Stat) uint64) float64 { return float64(f(a.after) - f(a.before)) }
	pgpgin := func(s memcg.Stat) uint64 { return s.Counters.Pgpgin }
	pgpgout := func(s memcg.Stat) uint64 { return s.Counters.Pgpgout }
	failcnt := func(s memcg.Stat) uint64 { return s.Counters.Failcnt }
	stall := func(s memcg.Stat) uint64 { return s.Pressure.SomeTotal }
	stallFull := func(s memcg.Stat) uint64 { return s.Pressure.FullTotal }
	steal := float64(wi.daemon["kswapd_steal"])

	t.Num("pgpgin (pages, memory.stat Δ)", "%.0f", delta(wo, pgpgin), delta(wi, pgpgin))
	t.Num("pgpgout (pages, memory.stat Δ)", "%.0f", delta(wo, pgpgout), delta(wi, pgpgout))
	t.Num("kswapd_steal (pages, memcgd's background reclaim)", "%.0f", 0, steal)
	t.Text("pg_pgsteal, pg_scan, kswapd_pgscan, pgrefill", "n/a (v1 has no per-cgroup reclaim counters)", "n/a")
	t.Num("direct reclaim, estimated: pgpgout − kswapd_steal (pages)", "%.0f",
		delta(wo, pgpgout), max(delta(wi, pgpgout)-steal, 0))
	t.Num("pgoutrun (memcgd's background reclaim runs)", "%.0f", 0, float64(wi.daemon["pgoutrun"]))
	t.Num("allocstall → memory.failcnt Δ (charges that hit the limit)", "%.0f", delta(wo, failcnt), delta(wi, failcnt))
	t.Num("writer memory stall, PSI some (ms)", "%.1f", delta(wo, stall)/1e3, delta(wi, stall)/1e3)
	t.Num("writer memory stall, PSI full (ms)", "%.1f", delta(wo, stallFull)/1e3, delta(wi, stallFull)/1e3)
	t.Num("real (s)", "%.2f", wo.use.Wall.Seconds(), wi.use.Wall.Seconds())
	t.Num("user (s)", "%.2f", wo.use.User.Seconds(), wi.use.User.Seconds())
	t.Num("sys (s)", "%.2f", wo.use.Sys.Seconds(), wi.use.Sys.Seconds())
	t.Num("throughput (MiB/s, write phase)", "%.1f", lab.MiB(uint64(wo.res.Throughput())), lab.MiB(uint64(wi.res.Throughput())))
	t.Num("memcgd targeted write-outs", "%.0f", 0, float64(wi.daemon["writeout_targeted"]))
	t.Num("memcgd full flushes", "%.0f", 0, float64(wi.daemon["writeout_flush"]))
	t.Num("memcgd throttle pauses", "%.0f", 0, float64(wi.daemon["throttle_pauses"]))
	t.Num("memcgd time paused (ms)", "%.0f", 0, float64(wi.daemon["throttle_paused_us"])/1e3)
	return t.String()
}
