// Command e2 is seed 004's experiment (per-cgroup dirty limit, Andrea Righi
// 2010), scaled to one machine, in two parts.
//
// Part 1, the dirty limit: a sequential writer in a cgroup limited to
// -limit, with memcgd's rule dirty_bytes -dirty-bytes and
// dirty_background_bytes -dirty-background-bytes for it; the cgroup's
// dirty+writeback is sampled every -every (max, p99, mean), and the
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
//	go run ./experiments/e2 [-size 2G] [-limit 100M] [-rate 100M] [-runs 2]
//	go run ./experiments/e2 -vm v2     # in a cgroup v2 test VM, sizes scaled to it
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/memcgd/memcgd/cgroupfs"
	"github.com/memcgd/memcgd/experiments/internal/lab"
	"github.com/memcgd/memcgd/memcg"
)

func main() {
	// In the VM (a 50 MB/s disk, a guest several times slower than the
	// host): a quarter of the data, paced below the disk's rate.
	f := lab.Flags{VMDefaults: map[string]string{"size": "512M", "limit": "100M", "rate": "20M", "bw-size": "256M",
		"dirty-bytes": "16M", "dirty-background-bytes": "8M"}}
	f.Register(flag.CommandLine)
	e := experiment{size: 2 << 30, limit: 100 << 20, rate: 100 << 20, dirty: 16 << 20, background: 8 << 20,
		bwSize: 2 << 30, bwChunk: 4 << 10}
	flag.Var(&e.size, "size", "bytes the writer writes in part 1")
	flag.Var(&e.limit, "limit", "memory limit of the limited cgroup")
	flag.Var(&e.rate, "rate", "rate of the paced writer, bytes per second")
	flag.Var(&e.dirty, "dirty-bytes", "memcgd dirty_bytes of the writer's cgroup")
	flag.Var(&e.background, "dirty-background-bytes", "memcgd dirty_background_bytes of the writer's cgroup")
	flag.Var(&e.bwSize, "bw-size", "bytes each writer writes in part 2")
	flag.Var(&e.bwChunk, "bw-chunk", "bytes per write(2) in part 2 (the thread's dd used bs=4K)")
	flag.DurationVar(&e.every, "every", 10*time.Millisecond, "sampling interval of dirty+writeback")
	flag.StringVar(&e.parts, "parts", "12", "parts to run: 1 (dirty limit), 2 (bandwidth) or 12")
	flag.Parse()
	lab.Main("./experiments/e2", f, e.run)
}

type experiment struct {
	size, limit, rate, dirty, background lab.Size
	bwSize, bwChunk                      lab.Size
	every                                time.Duration
	parts                                string
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
	for run := 1; run <= b.Runs; run++ {
		if e.parts == "1" || e.parts == "12" {
			if err := e.part1(ctx, b, run); err != nil {
				return err
			}
		}
		if e.parts == "2" || e.parts == "12" {
			if err := e.part2(ctx, b, run); err != nil {
				return err
			}
		}
	}
	return nil
}

// sample is what one part-1 run measured.
type sample struct {
	dirty  lab.Summary
	frozen float64 // share of samples with the cgroup frozen, %
	res    lab.WriterResult
	daemon lab.DaemonResult
}

func (e experiment) part1(ctx context.Context, b *lab.Bench, run int) error {
	for _, mode := range []string{"paced", "unpaced"} {
		rate := uint64(0)
		if mode == "paced" {
			rate = uint64(e.rate)
		}
		var s [2]sample // without, with
		for _, with := range lab.Order(run) {
			r, err := e.limitRun(ctx, b, fmt.Sprintf("p1-%s-%d-%v", mode, run, with), rate, with)
			if err != nil {
				return err
			}
			if with {
				s[1] = r
			} else {
				s[0] = r
			}
		}
		t := lab.NewCompare("without memcgd", "with memcgd")
		thresh := float64(e.dirty)
		stock := "none (v1 has no per-cgroup dirty limit)"
		if b.Layout.Memory.Version == cgroupfs.V2 {
			// mm/page-writeback.c balance_dirty_pages, mdtc: v2 cgroup
			// writeback limits each memcg domain too, to the global ratio
			// of the cgroup's dirtyable memory.
			stock = "the kernel's memcg domain: vm.dirty_ratio of the cgroup's file pages + headroom"
		}
		t.Text("dirty_thresh in force", stock, memcg.FormatSize(s[1].daemon.Fields["dirty_thresh"]))
		t.Num("dirty+writeback max (MiB)", "%.1f", lab.MiB(s[0].dirty.Max), lab.MiB(s[1].dirty.Max))
		t.Num("dirty+writeback p99 (MiB)", "%.1f", lab.MiB(s[0].dirty.P99), lab.MiB(s[1].dirty.P99))
		t.Num("dirty+writeback p99 / dirty_bytes", "%.2f", float64(s[0].dirty.P99)/thresh, float64(s[1].dirty.P99)/thresh)
		t.Num("dirty+writeback mean (MiB)", "%.1f", s[0].dirty.Mean/(1<<20), s[1].dirty.Mean/(1<<20))
		t.Num("samples", "%.0f", float64(s[0].dirty.N), float64(s[1].dirty.N))
		t.Num("throughput (MiB/s, write phase)", "%.1f", lab.MiB(uint64(s[0].res.Throughput())), lab.MiB(uint64(s[1].res.Throughput())))
		t.Num("memcgd targeted write-outs", "%.0f", 0, float64(s[1].daemon.Fields["writeout_targeted"]))
		t.Num("memcgd full flushes", "%.0f", 0, float64(s[1].daemon.Fields["writeout_flush"]))
		t.Num("memcgd throttle pauses", "%.0f", 0, float64(s[1].daemon.Fields["throttle_pauses"]))
		t.Num("samples with the writer frozen (%)", "%.1f", s[0].frozen, s[1].frozen)
		t.Num("memcgd time paused (ms)", "%.0f", 0, float64(s[1].daemon.Fields["throttle_paused_us"])/1e3)
		t.Num("memcgd CPU, user+sys (s)", "%.2f", 0, (s[1].daemon.Usage.User + s[1].daemon.Usage.Sys).Seconds())
		fmt.Printf("### Part 1, dirty limit, %s, run %d (%s)\n\n%s\n", mode, run, lab.FirstArm(run), t)
	}
	return nil
}

// limitRun runs the part-1 writer once in a fresh limited cgroup,
// sampling its dirty+writeback.
func (e experiment) limitRun(ctx context.Context, b *lab.Bench, name string, rate uint64, with bool) (s sample, err error) {
	if err := lab.DropCaches(); err != nil {
		return s, err
	}
	c, err := b.Cgroup(nil, name, lab.CgroupOptions{Limit: uint64(e.limit), Mirror: true})
	if err != nil {
		return s, err
	}
	d, err := b.StartArm(ctx, with, e.config(b), c)
	if err != nil {
		return s, err
	}
	sm := b.Sample(e.every, c)
	w := lab.Writer{Bin: b.Writer, File: b.File("e2-" + name), Size: uint64(e.size), Chunk: 1 << 20, Rate: rate}
	s.res, _, err = w.Run(ctx, c)
	samples, serr := sm.Stop()
	if err != nil {
		return s, err
	}
	if serr != nil {
		return s, fmt.Errorf("sample %s: %w", c.Path, serr)
	}
	s.dirty = samples.Stats[0].Series(memcg.Stat.DirtyAndWriteback).Summary()
	s.frozen = samples.FrozenShare(0)
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
	t := lab.Table{Header: []string{"writer", "memcgd", "write() MiB/s", "write+fsync MiB/s", "dirty+writeback max (MiB)", "wall (s)"}}
	for _, with := range lab.Order(run) {
		for _, limited := range []bool{false, true} {
			name := fmt.Sprintf("p2-%d-%v-%v", run, with, limited)
			if err := lab.DropCaches(); err != nil {
				return err
			}
			c := b.Root
			where := "root of the subtree, no limit"
			// On v2 the Root may hold no task: see the package comment.
			own := limited || b.Layout.Memory.Version == cgroupfs.V2
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
			d, err := b.StartArm(ctx, with, e.config(b), c)
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
			state := "without"
			if with {
				state = "with"
			}
			t.Add(where, state, fmt.Sprintf("%.1f", lab.MiB(uint64(res.Throughput()))),
				fmt.Sprintf("%.1f", lab.MiB(uint64(res.DiskThroughput()))),
				fmt.Sprintf("%.1f", lab.MiB(samples.Stats[0].Series(memcg.Stat.DirtyAndWriteback).Summary().Max)), fmt.Sprintf("%.2f", use.Wall.Seconds()))
		}
	}
	fmt.Printf("### Part 2, bandwidth, %s in %s writes then fsync, run %d\n\n%s\n", e.bwSize.String(), e.bwChunk.String(), run, t.String())
	return nil
}
