// Command e2 is seed 004's experiment (per-cgroup dirty limit, Andrea Righi
// 2010), scaled to one machine, in two parts.
//
// Part 1, the dirty limit: a sequential writer in a cgroup limited to
// -limit, with memcgd's rule dirty_bytes -dirty-bytes and
// dirty_background_bytes -dirty-background-bytes for it; the cgroup's
// dirty+writeback is sampled every -every, 1 ms by default (max, p99,
// mean, and the sampling interval achieved), and the
// writer's throughput is measured, paced and unpaced, without and with
// memcgd.
//
// Part 2, the thread's bandwidth comparison (Vivek Goyal's dd runs): a
// writer in the root of the experiment's subtree (no limit) and one in a
// cgroup limited to -limit, one after the other, distinct files, caches
// dropped between runs, without and with memcgd. On cgroup v2 the subtree's
// root enables controllers for its children and so may hold no task (the
// no-internal-process rule): the unlimited writer runs in an unlimited
// child instead.
//
//	go run ./experiments/e2 [-size 2G] [-limit 100M] [-rate 100M] [-runs 3] [-parts 1] [-modes unpaced] [-arms stock,memcgd,fallback]
//	go run ./experiments/e2 -vm v2     # in a cgroup v2 test VM, sizes scaled to it
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/experiments/internal/lab"
	"github.com/memcgd/memcgd/internal/stall"
	"github.com/memcgd/memcgd/memcg"
)

func main() {
	// In the VM (a 50 MB/s disk, a guest several times slower than the
	// host): a quarter of the data, paced below the disk's rate.
	f := lab.Flags{VMDefaults: map[string]string{"size": "512M", "limit": "100M", "rate": "20M", "bw-size": "256M",
		"dirty-bytes": "16M", "dirty-background-bytes": "8M"}}
	f.Register(flag.CommandLine)
	e := experiment{size: 2 << 30, limit: 100 << 20, rate: 100 << 20, dirty: 16 << 20, background: 8 << 20,
		bwSize: 2 << 30, bwChunk: 4 << 10, chunk: 1 << 20}
	flag.Var(&e.size, "size", "bytes the writer writes in part 1")
	flag.Var(&e.chunk, "chunk", "bytes per write(2) in part 1")
	flag.Var(&e.limit, "limit", "memory limit of the limited cgroup")
	flag.Var(&e.rate, "rate", "rate of the paced writer, bytes per second")
	flag.Var(&e.dirty, "dirty-bytes", "memcgd dirty_bytes of the writer's cgroup")
	flag.Var(&e.background, "dirty-background-bytes", "memcgd dirty_background_bytes of the writer's cgroup")
	flag.Var(&e.bwSize, "bw-size", "bytes each writer writes in part 2")
	flag.Var(&e.bwChunk, "bw-chunk", "bytes per write(2) in part 2 (the thread's dd used bs=4K)")
	flag.DurationVar(&e.every, "every", time.Millisecond, "sampling interval of dirty+writeback (an unpaced writer fills dirty_bytes in a few ms)")
	flag.StringVar(&e.parts, "parts", "12", "parts to run: 1 (dirty limit), 2 (bandwidth) or 12")
	modes := flag.String("modes", "paced,unpaced", "part 1's writer modes, comma-separated: paced, unpaced")
	flag.StringVar(&e.trace, "trace", "", "directory to write part 1's samples to, one CSV per arm and run (ms since the start, dirty+writeback bytes, of which under writeback, frozen 0/1)")
	flag.Parse()
	for _, m := range strings.Split(*modes, ",") {
		switch m {
		case "paced", "unpaced":
			e.modes = append(e.modes, m)
		default:
			fmt.Fprintf(os.Stderr, "-modes: invalid mode %q: allowed paced, unpaced\n", m)
			os.Exit(2)
		}
	}
	if e.every <= 0 {
		fmt.Fprintf(os.Stderr, "-every: invalid value %v: want a positive interval\n", e.every)
		os.Exit(2)
	}
	lab.Main("./experiments/e2", f, e.run)
}

type experiment struct {
	size, limit, rate, dirty, background lab.Size
	bwSize, bwChunk, chunk               lab.Size
	every                                time.Duration
	parts                                string
	modes                                []string
	trace                                string
}

// config is memcgd's config for both parts: the default policy over the
// lab's subtree, and the dirty rule for the limited cgroups beneath it.
func (e experiment) config(b *lab.Bench) string {
	return fmt.Sprintf(`version: 1
manage: {under: %s, limited_only: true}
defaults: {dirty_ratio: 10, dirty_background_ratio: 5, min_free_kbytes: auto, writeback_first: true}
rules:
  - match: %s/*
    set: {dirty_bytes: %d, dirty_background_bytes: %d}
`, b.Root.Path, b.Root.Path, e.dirty, e.background)
}

func (e experiment) run(ctx context.Context, b *lab.Bench) error {
	fmt.Printf("memcgd config:\n\n```yaml\n%s```\n\n", e.config(b))
	names := make([]string, len(b.Arms))
	for i, a := range b.Arms {
		names[i] = a.Name
	}
	p1 := part1Summary{medians: map[string]*lab.Medians{}}
	for _, mode := range e.modes {
		p1.medians[mode] = lab.NewMedians(names...)
	}
	for run := 1; run <= b.Runs; run++ {
		if e.parts == "1" || e.parts == "12" {
			if err := e.part1(ctx, b, run, &p1); err != nil {
				return err
			}
		}
		if e.parts == "2" || e.parts == "12" {
			if err := e.part2(ctx, b, run); err != nil {
				return err
			}
		}
	}
	if e.parts == "1" || e.parts == "12" {
		for _, mode := range e.modes {
			fmt.Printf("### Part 1, dirty limit, %s, %s writes, medians of %d runs\n\n%s\n", mode, e.chunk.String(), b.Runs, p1.medians[mode])
		}
		fmt.Printf("### Targets (issue 7; paced: issue 3), medians of %d runs\n\n%s\n", b.Runs, p1.targets.String())
	}
	return nil
}

// part1Summary gathers part 1's runs: the medians per mode and the targets.
type part1Summary struct {
	medians map[string]*lab.Medians
	targets lab.Targets
}

// sample is what one part-1 run measured.
type sample struct {
	dirty  lab.Summary
	frozen float64 // share of samples with the cgroup frozen, %
	// gap is the sampling interval achieved: median and p99 of the
	// time between two samples.
	gapP50, gapP99 time.Duration
	// over are the stretches with dirty+writeback above 1.25 ×
	// dirty_bytes (issue 7's unpaced target).
	over lab.Excursions
	// late are the delays from dirty+writeback passing 1.25 ×
	// dirty_bytes, the cgroup running, to its next freeze.
	late lab.Series
	// stalls are the machine's stalls during the writer's run
	// (stall.Probe).
	stalls stall.Stalls
	res    lab.WriterResult
	daemon lab.DaemonResult
}

func (e experiment) part1(ctx context.Context, b *lab.Bench, run int, sum *part1Summary) error {
	for _, mode := range e.modes {
		rate := uint64(0)
		if mode == "paced" {
			rate = uint64(e.rate)
		}
		s := make([]sample, len(b.Arms))
		for _, i := range lab.Order(run, len(b.Arms)) {
			r, err := e.limitRun(ctx, b, fmt.Sprintf("p1-%s-%d-%s", mode, run, b.Arms[i].Name), rate, b.Arms[i])
			if err != nil {
				return err
			}
			s[i] = r
		}
		names := make([]string, len(b.Arms))
		for i, a := range b.Arms {
			names[i] = a.Name
		}
		t, m := lab.NewCompare(names...), sum.medians[mode]
		num := func(name, format string, f func(sample) float64) {
			v := make([]float64, len(s))
			for i := range s {
				v[i] = f(s[i])
			}
			t.Num(name, format, v...)
			m.Num(name, format, v...)
		}
		text := func(name string, f func(sample) string) {
			v := make([]string, len(s))
			for i := range s {
				v[i] = f(s[i])
			}
			t.Text(name, v...)
		}
		field := func(name string) func(sample) float64 {
			return func(s sample) float64 { return float64(s.daemon.Fields[name]) }
		}
		thresh := float64(e.dirty)
		stock := "none (v1 has no per-cgroup dirty limit)"
		if b.Layout.Memory.Version == layout.V2 {
			// mm/page-writeback.c balance_dirty_pages, mdtc: v2 cgroup
			// writeback limits each memcg domain too, to the global ratio
			// of the cgroup's dirtyable memory.
			stock = "the kernel's memcg domain: vm.dirty_ratio of the cgroup's file pages + headroom"
		}
		text("dirty_thresh in force", func(s sample) string {
			if s.daemon.Fields == nil {
				return stock
			}
			return memcg.FormatSize(s.daemon.Fields["dirty_thresh"])
		})
		text("dirty-tracking path (memcgd stat dirty_tracker)", func(s sample) string {
			if s.daemon.Fields == nil {
				return "—"
			}
			return s.daemon.Tracker()
		})
		num("dirty+writeback max (MiB)", "%.1f", func(s sample) float64 { return lab.MiB(s.dirty.Max) })
		num("dirty+writeback p99 (MiB)", "%.1f", func(s sample) float64 { return lab.MiB(s.dirty.P99) })
		num("dirty+writeback p99 / dirty_bytes", "%.2f", func(s sample) float64 { return float64(s.dirty.P99) / thresh })
		num("dirty+writeback mean (MiB)", "%.1f", func(s sample) float64 { return s.dirty.Mean / (1 << 20) })
		num("time with dirty+writeback over 1.25 × dirty_bytes (%)", "%.1f", func(s sample) float64 { return s.over.Share })
		num("time with dirty+writeback over 1.25 × dirty_bytes (ms)", "%.1f", func(s sample) float64 { return ms(s.over.Above) })
		num("  the same, by memcgd's own looks (ms; dirty_over_thresh_quarter_us)", "%.1f", func(s sample) float64 {
			if s.daemon.Fields == nil {
				return math.NaN()
			}
			return field("dirty_over_thresh_quarter_us")(s) / 1e3
		})
		num("stretches over 1.25 × dirty_bytes", "%.0f", func(s sample) float64 { return float64(s.over.N) })
		num("longest stretch over 1.25 × dirty_bytes (ms)", "%.1f", func(s sample) float64 { return ms(s.over.Longest) })
		// How late the throttle caught each overshoot: from the first
		// sample over 1.25 × dirty_bytes, the cgroup running, to the
		// first sample with it frozen again. Only arms with a daemon.
		daemonOnly := func(f func(sample) float64) func(sample) float64 {
			return func(s sample) float64 {
				if s.daemon.Fields == nil {
					return math.NaN()
				}
				return f(s)
			}
		}
		num("overshoots past 1.25 × dirty_bytes caught by a freeze", "%.0f", daemonOnly(func(s sample) float64 { return float64(len(s.late)) }))
		num("from overshoot to freeze, p50 (ms)", "%.1f", daemonOnly(func(s sample) float64 { return ms(time.Duration(s.late.Percentile(50))) }))
		num("from overshoot to freeze, max (ms)", "%.1f", daemonOnly(func(s sample) float64 { return ms(time.Duration(s.late.Percentile(100))) }))
		num("overshoots caught more than 10 ms late", "%.0f", daemonOnly(func(s sample) float64 {
			return float64(len(s.late)) * (100 - s.late.Below(uint64(10*time.Millisecond)+1)) / 100
		}))
		num("samples", "%.0f", func(s sample) float64 { return float64(s.dirty.N) })
		num("machine stalls: every CPU's 1 ms sleeper over 5 ms late at once", "%.0f", func(s sample) float64 { return float64(s.stalls.Count) })
		num("  time in them (ms)", "%.1f", func(s sample) float64 { return ms(s.stalls.Total) })
		num("interval between samples, p50 (ms)", "%.2f", func(s sample) float64 { return ms(s.gapP50) })
		num("interval between samples, p99 (ms)", "%.2f", func(s sample) float64 { return ms(s.gapP99) })
		num("throughput (MiB/s, write phase)", "%.1f", func(s sample) float64 { return lab.MiB(uint64(s.res.Throughput())) })
		num("memcgd targeted write-outs", "%.0f", field("writeout_targeted"))
		num("memcgd full flushes", "%.0f", field("writeout_flush"))
		num("memcgd throttle pauses", "%.0f", field("throttle_pauses"))
		num("samples with the writer frozen (%)", "%.1f", func(s sample) float64 { return s.frozen })
		num("memcgd time paused (ms)", "%.0f", func(s sample) float64 { return field("throttle_paused_us")(s) / 1e3 })
		num("memcgd time its pace held the writer (ms; summed over CPUs)", "%.0f", func(s sample) float64 { return field("throttle_pace_held_us")(s) / 1e3 })
		num("memcgd CPU during the writer's run (% of one core)", "%.1f", func(s sample) float64 {
			if s.daemon.Busy < 0 {
				return math.NaN() // no daemon
			}
			return s.daemon.Busy * 100
		})
		num("  of it in write-out, flush and reclaim calls (% of one core)", "%.1f", func(s sample) float64 { return s.daemon.KernelWorkPercent() })
		num("memcgd steps (looks at a cgroup), a second", "%.0f", func(s sample) float64 { return s.daemon.StepRate() })
		num("memcgd: its loop's wake-ups for its timers", "%.0f", func(s sample) float64 { return s.daemon.TimerWakeUps() })
		num("  how late they came, p50 (ms; memcgd_timer_lateness_seconds)", "%.2f", func(s sample) float64 { return s.daemon.LateP50() })
		num("  p99 (ms)", "%.2f", func(s sample) float64 { return s.daemon.LateP99() })
		num("memcgd CPU, user+sys over its life (s)", "%.2f", func(s sample) float64 { return (s.daemon.Usage.User + s.daemon.Usage.Sys).Seconds() })
		fmt.Printf("### Part 1, dirty limit, %s, run %d (%s)\n\n%s\n", mode, run, lab.OrderText(run, b.Arms), t)

		for i := 1; i < len(s); i++ {
			ratio := float64(s[i].dirty.P99) / thresh
			tp := s[i].res.Throughput() / s[0].res.Throughput()
			name := b.Arms[i].Name
			switch {
			case mode == "paced":
				sum.targets.Add("E2 paced: p99 of dirty+writeback ≤ 1.1 × dirty_bytes", name, "%.2f", func(v float64) bool { return v <= 1.1 }, ratio)
			case name == lab.Fallback.Name:
				sum.targets.Add("E2 unpaced, fallback: p99 of dirty+writeback ≤ 1.5 × dirty_bytes", name, "%.2f", func(v float64) bool { return v <= 1.5 }, ratio)
			default:
				sum.targets.Add("E2 unpaced: p99 of dirty+writeback ≤ 1.25 × dirty_bytes", name, "%.2f", func(v float64) bool { return v <= 1.25 }, ratio)
			}
			// Not a target: what holding the limit costs the writer.
			sum.targets.Add("E2 "+mode+": throughput vs stock (no target)", name, "%.3f", nil, tp)
		}
	}
	return nil
}

// writeTrace writes the samples to file as CSV: milliseconds since the
// sampling began, dirty+writeback bytes, and 1 when the cgroup was frozen.
func writeTrace(file string, s lab.DirtySamples) error {
	var b strings.Builder
	b.WriteString("ms,dirty_writeback_bytes,writeback_bytes,frozen\n")
	for i, at := range s.At {
		f := 0
		if s.Frozen[i] {
			f = 1
		}
		fmt.Fprintf(&b, "%.3f,%d,%d,%d\n", ms(at), s.Bytes[i], s.Writeback[i], f)
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("-trace: %w", err)
	}
	return nil
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// limitRun runs the part-1 writer once in a fresh limited cgroup,
// sampling its dirty+writeback.
func (e experiment) limitRun(ctx context.Context, b *lab.Bench, name string, rate uint64, arm lab.Arm) (s sample, err error) {
	if err := lab.DropCaches(); err != nil {
		return s, err
	}
	c, err := b.Cgroup(nil, name, lab.CgroupOptions{Limit: uint64(e.limit), Mirror: true})
	if err != nil {
		return s, err
	}
	d, err := b.StartArm(ctx, arm, e.config(b), c)
	if err != nil {
		return s, err
	}
	sm, err := b.SampleDirty(e.every, c)
	if err != nil {
		return s, err
	}
	w := lab.Writer{Bin: b.Writer, File: b.File("e2-" + name), Size: uint64(e.size), Chunk: uint64(e.chunk), Rate: rate}
	probe, err := stall.Start()
	if err != nil {
		return s, err
	}
	d.BusyStart()
	s.res, _, err = w.Run(ctx, c)
	d.BusyEnd()
	stalls, perr := probe.Stop()
	samples, serr := sm.Stop()
	if err != nil {
		return s, err
	}
	if serr != nil {
		return s, fmt.Errorf("sample %s: %w", c.Path, serr)
	}
	if s.stalls = stalls; perr != nil {
		return s, perr
	}
	s.dirty = samples.Bytes.Summary()
	s.frozen = samples.FrozenShare()
	s.gapP50, s.gapP99 = samples.Gaps()
	s.over = samples.Above(uint64(e.dirty) * 5 / 4)
	s.late = samples.FreezeDelays(uint64(e.dirty) * 5 / 4)
	if e.trace != "" {
		if err := writeTrace(filepath.Join(e.trace, name+".csv"), samples); err != nil {
			return s, err
		}
	}
	if s.daemon, err = b.EndArm(ctx, d, c); err != nil {
		return s, err
	}
	if err := b.Remove(c); err != nil {
		return s, err
	}
	return s, os.Remove(w.File)
}

// part2 is the thread's bandwidth comparison.
func (e experiment) part2(ctx context.Context, b *lab.Bench, run int) error {
	t := lab.Table{Header: []string{"writer", "arm", "write() MiB/s", "write+fsync MiB/s", "dirty+writeback max (MiB)", "wall (s)"}}
	for _, ai := range lab.Order(run, len(b.Arms)) {
		arm := b.Arms[ai]
		for _, limited := range []bool{false, true} {
			name := fmt.Sprintf("p2-%d-%s-%v", run, arm.Name, limited)
			if err := lab.DropCaches(); err != nil {
				return err
			}
			c := b.Root
			where := "root of the subtree, no limit"
			// On v2 the Root may hold no task: see the package comment.
			own := limited || b.Layout.Memory.Version == layout.V2
			if own {
				o := lab.CgroupOptions{Mirror: true}
				where = "child of the subtree's root, no limit"
				if limited {
					o.Limit = uint64(e.limit)
					where = "cgroup limited to " + e.limit.String()
				}
				var err error
				if c, err = b.Cgroup(nil, name, o); err != nil {
					return err
				}
			}
			d, err := b.StartArm(ctx, arm, e.config(b), c)
			if err != nil {
				return err
			}
			sm := b.Sample(e.every, c)
			w := lab.Writer{Bin: b.Writer, File: b.File("e2-" + name), Size: uint64(e.bwSize), Chunk: uint64(e.bwChunk), Fsync: true}
			res, use, err := w.Run(ctx, c)
			samples, serr := sm.Stop()
			if err != nil {
				return err
			}
			if serr != nil {
				return fmt.Errorf("sample %s: %w", c.Path, serr)
			}
			if _, err := b.EndArm(ctx, d, c); err != nil {
				return err
			}
			if own {
				if err := b.Remove(c); err != nil {
					return err
				}
			}
			if err := os.Remove(w.File); err != nil {
				return err
			}
			t.Add(where, arm.Name, fmt.Sprintf("%.1f", lab.MiB(uint64(res.Throughput()))),
				fmt.Sprintf("%.1f", lab.MiB(uint64(res.DiskThroughput()))),
				fmt.Sprintf("%.1f", lab.MiB(samples.Stats[0].Series(memcg.Stat.DirtyAndWriteback).Summary().Max)), fmt.Sprintf("%.2f", use.Wall.Seconds()))
		}
	}
	fmt.Printf("### Part 2, bandwidth, %s in %s writes then fsync, run %d\n\n%s\n", e.bwSize.String(), e.bwChunk.String(), run, t.String())
	return nil
}
