// Command e4 is a noisy-neighbour experiment: one cgroup's writer writes
// as fast as it can into the page cache, with a memory limit large enough
// that it is not the limit that paces it, while three victims run beside
// it and measure what it, and memcgd's throttle acting on it, do to them:
//
//   - a sleeper in the writer's own cgroup, sleeping 1 ms in a loop: how
//     late it wakes (a freeze stops every task of the cgroup);
//   - a write-ahead log in a cgroup of its own on the same filesystem, a
//     4 KiB write and an fdatasync in a loop: their latency and how many
//     it completes;
//   - a paced buffered writer in a third cgroup: its throughput against
//     its pace and against its own throughput alone, the latency of its
//     write(2)s, and how much of its time it spends in
//     balance_dirty_pages().
//
// The noisy writer is dd: it reads each 1 MiB chunk from a source, /dev/zero
// or a pipe fed by a thread in its cgroup (-sources), writes what it read,
// counts the reads that returned less than asked (a freeze's fake signal
// cuts them short) and the writes that wrote less, and fsyncs at the end,
// so that every arm puts the same bytes on the disk within the window the
// victims measure (-fsync=false ends the window with the writes instead:
// the stock kernel then leaves most of a few GiB to be written after it,
// while memcgd writes them out within it).
//
// Arms: stock (no memcgd); memcgd (its default policy, dirty_bytes
// -dirty-bytes on the writer's cgroup); selfpaced (no memcgd; the writer
// keeps at most -dirty-bytes dirty or under writeback itself: the ceiling
// of any throttle); fallback (memcgd without its eBPF tracker); and
// ablations that take parts of memcgd away, to find what hurts the
// victims: nothrottle (dirty_bytes out of reach, so that the throttle
// never acts and only write-out, at the same background threshold, and
// reclaim run), watch (nothing can act: the daemon only watches and
// looks), noreclaim (no background reclaim), slice0 (the kernel's default
// scheduler slice for the daemon's threads).
//
// Before each arm the caches are written back and dropped, the disk is
// left idle for -idle and then probed until small write+fdatasync pairs
// answer as on an idle disk (lab.Settle): without the idle time, on this
// lab's virtual disk, whichever arm ran second in a run had the log's p99
// several times the first's, whichever it was.
//
// Each run also measures the victims alone, without the noisy writer nor
// memcgd. Beside the figures it reports the evidence needed to tell the
// suspects apart: each victim thread's time waiting for a CPU
// (schedstat), where the log's thread and the buffered writer's thread
// block (their kernel stacks, sampled every -stack-every), the block
// device's mean write and flush latency, the journal's commits and where
// its thread waits (when the filesystem has a journal), and the daemon's
// CPU and wake-ups.
//
//	go run ./experiments/e4 [-size 12G] [-limit 8G] [-dirty-bytes 64M] [-runs 5] [-arms stock,memcgd,selfpaced,nothrottle,watch] [-sources zero]
//	go run ./experiments/e4 -vm v2     # in a cgroup v2 test VM on a throttled disk, sizes scaled to it
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/memcgd/memcgd/experiments/internal/lab"
	"github.com/memcgd/memcgd/host"
)

// The experiment's own arms, beside lab.KnownArms.
var (
	// noThrottle: memcgd whose throttle can never act (dirty_bytes out
	// of reach), with the write-out at the memcgd arm's background
	// threshold and background reclaim as by default.
	noThrottle = lab.Arm{Name: "nothrottle", Daemon: true}
	// watchOnly: memcgd that can do nothing (no limit reached, no
	// background reclaim): its looks, its tracker and its CPU alone.
	watchOnly = lab.Arm{Name: "watch", Daemon: true}
	// noReclaim: memcgd as by default but without background reclaim.
	noReclaim = lab.Arm{Name: "noreclaim", Daemon: true}
	// slice0: memcgd as by default with the kernel's default scheduler
	// slice for its threads instead of its shorter one.
	slice0 = lab.Arm{Name: "slice0", Daemon: true, Args: []string{"--sched-slice=0"}}
)

// unreachable is a dirty threshold no cgroup reaches.
const unreachable = 1 << 40

func main() {
	// In the VM: a 50 MB/s disk and a guest several times slower than the
	// host; 3 GB of memory.
	f := lab.Flags{
		VMDefaults: map[string]string{"size": "1536M", "limit": "1G", "bg-rate": "4M", "solo": "5s"},
		ExtraArms:  []lab.Arm{lab.SelfPaced, noThrottle, watchOnly, noReclaim, slice0},
		UsesVictim: true,
	}
	f.Register(flag.CommandLine)
	e := experiment{size: 12 << 30, limit: 8 << 30, dirty: 64 << 20, chunk: 1 << 20, block: 4 << 10,
		bgRate: 32 << 20, bgChunk: 1 << 20}
	flag.Var(&e.size, "size", "bytes the noisy writer writes")
	flag.Var(&e.limit, "limit", "memory limit of the noisy writer's cgroup (large: the limit must not pace it)")
	flag.Var(&e.dirty, "dirty-bytes", "memcgd dirty_bytes of the noisy writer's cgroup, and the self-paced writer's budget")
	flag.Var(&e.chunk, "chunk", "bytes the noisy writer reads and writes per call")
	flag.Var(&e.rate, "rate", "pace of the noisy writer, bytes per second; 0 (the default) is unpaced. A pace every arm keeps gives the device the same load in every arm")
	flag.Var(&e.block, "block", "bytes the log writes before each fdatasync")
	flag.Var(&e.bgRate, "bg-rate", "pace of the buffered writer in the third cgroup, bytes per second")
	flag.Var(&e.bgChunk, "bg-chunk", "bytes per write(2) of the buffered writer")
	flag.BoolVar(&e.fsync, "fsync", true, "fsync the noisy writer's file at the end, inside the victims' window, so that every arm puts the same bytes on the disk within it; without, the window ends with the writes, and what the kernel has not written back by then falls outside it")
	flag.DurationVar(&e.idle, "idle", 40*time.Second, "how long the disk is left idle before each arm, after sync(2) and before the probe that waits for it to settle: a virtual disk's host may write an arm's data out long after the guest's sync")
	flag.DurationVar(&e.solo, "solo", 10*time.Second, "how long the victims run alone in each run (0: not at all)")
	flag.DurationVar(&e.stackEvery, "stack-every", 5*time.Millisecond, "interval at which the victims' and the journal's kernel stacks are sampled (0: not sampled)")
	sources := flag.String("sources", "zero", "the noisy writer's sources, comma-separated: zero (/dev/zero), pipe (a pipe fed by a thread in its cgroup)")
	flag.Parse()
	for _, s := range strings.Split(*sources, ",") {
		switch s {
		case "zero", "pipe":
			e.sources = append(e.sources, s)
		default:
			fmt.Fprintf(os.Stderr, "-sources: invalid source %q: allowed zero, pipe\n", s)
			os.Exit(2)
		}
	}
	lab.Main("./experiments/e4", f, e.run)
}

type experiment struct {
	size, limit, dirty, chunk, block lab.Size
	rate                             lab.Size
	bgRate, bgChunk                  lab.Size
	solo, stackEvery, idle           time.Duration
	fsync                            bool
	sources                          []string
}

// defaultPolicy is the embedded policy's defaults, as a YAML flow
// mapping's contents.
const defaultPolicy = "dirty_ratio: 10, dirty_background_ratio: 5, min_free_kbytes: auto, writeback_first: true"

// knobs are the knobs of arm a: the defaults of its config, and the set
// mapping of the noisy writer's cgroup. An ablation's knobs go into the
// defaults too: a cgroup's thresholds are never above its ancestors'
// (memcg.EffectiveDirtyLimits), and the lab's root, an ancestor of every
// cgroup, would otherwise keep the default ratios of the machine's memory
// (a background threshold of about 5 % of it), which a writer with a
// limit of gigabytes reaches.
func (e experiment) knobs(a lab.Arm) (defaults, rule string) {
	switch a.Name {
	case noThrottle.Name:
		// The memcgd arm's background threshold: half its dirty_bytes
		// (memcg.Knobs.DirtyLimits, a background at or above the limit).
		k := fmt.Sprintf("dirty_bytes: %d, dirty_background_bytes: %d, min_free_kbytes: auto, writeback_first: true", unreachable, e.dirty/2)
		return k, k
	case watchOnly.Name:
		k := fmt.Sprintf("dirty_bytes: %d, dirty_background_bytes: %d, min_free_kbytes: 0, writeback_first: true", unreachable, unreachable/2)
		return k, k
	case noReclaim.Name:
		return defaultPolicy, fmt.Sprintf("dirty_bytes: %d, min_free_kbytes: 0", e.dirty)
	default:
		return defaultPolicy, fmt.Sprintf("dirty_bytes: %d", e.dirty)
	}
}

// config is memcgd's config in arm a: its defaults over the lab's subtree
// and its rule for the noisy writer's cgroups. The victims' cgroups have
// no limit, so memcgd leaves them alone.
func (e experiment) config(root host.Cgroup, a lab.Arm) string {
	defaults, rule := e.knobs(a)
	return fmt.Sprintf(`version: 1
manage: {under: %s, limited_only: true}
defaults: {%s}
rules:
  - match: %s/w-*
    set: {%s}
`, root, defaults, root, rule)
}

func (e experiment) run(ctx context.Context, b *lab.Bench) error {
	pace := "unpaced"
	if e.rate > 0 {
		pace = "paced at " + e.rate.String() + "/s"
	}
	synced := "fsynced at the end"
	if !e.fsync {
		synced = "not fsynced (the window ends with its writes)"
	}
	fmt.Printf("Noisy writer: %s in %s reads and writes, %s, %s, in a cgroup limited to %s; "+
		"the log: %s write + fdatasync in a loop; the buffered writer: %s write(2)s paced at %s/s; the sleeper: 1 ms sleeps in the writer's cgroup. "+
		"Kernel stacks sampled every %v.\n\n",
		e.size.String(), e.chunk.String(), pace, synced, e.limit.String(), e.block.String(), e.bgChunk.String(), e.bgRate.String(), e.stackEvery)
	for _, a := range b.Arms {
		if a.Daemon {
			fmt.Printf("memcgd config, arm %s:\n\n```yaml\n%s```\n\n", a.Name, e.config(b.Root.Path, a))
		}
	}
	journal, hasJournal, err := b.Journal()
	if err != nil {
		return err
	}
	names := make([]string, len(b.Arms))
	for i, a := range b.Arms {
		names[i] = a.Name
	}
	s := summary{medians: map[string]*lab.Medians{}, ratios: map[string]*lab.Targets{}, stacks: map[string]map[string]lab.Stacks{},
		alone: lab.NewMedians("alone")}
	for _, src := range e.sources {
		s.medians[src], s.ratios[src] = lab.NewMedians(names...), &lab.Targets{}
		s.stacks[src] = map[string]lab.Stacks{}
	}
	env := armEnv{journal: journal, hasJournal: hasJournal, idle: e.idle}
	for run := 1; run <= b.Runs; run++ {
		var solo victims
		if e.solo > 0 {
			if solo, err = e.alone(ctx, b, run); err != nil {
				return err
			}
			t := lab.NewCompare("alone")
			aloneRows(t, s.alone, solo)
			fmt.Printf("### Victims alone (no noisy writer, no memcgd), run %d\n\n%s\n", run, t)
		}
		env.settle = settleBound(solo)
		for _, src := range e.sources {
			res := make([]result, len(b.Arms))
			for _, i := range lab.Order(run, len(b.Arms)) {
				tag := fmt.Sprintf("%s-%d-%s", src, run, b.Arms[i].Name)
				if res[i], err = e.arm(ctx, b, env, tag, src, b.Arms[i]); err != nil {
					return err
				}
			}
			t := lab.NewCompare(names...)
			rows(t, s.medians[src], res, solo, env)
			fmt.Printf("### Source %s, run %d (%s; ended %s)\n\n%s\n", src, run, lab.OrderText(run, b.Arms),
				time.Now().UTC().Format("15:04 MST"), t)
			ratios(s.ratios[src], b.Arms, res, solo)
			for i, a := range b.Arms {
				mergeStacks(s.stacks[src], a.Name, res[i].stacks)
			}
		}
	}
	if e.solo > 0 {
		fmt.Printf("### Victims alone, medians of %d runs\n\n%s\n", b.Runs, s.alone)
	}
	for _, src := range e.sources {
		fmt.Printf("### Source %s, medians of %d runs\n\n%s\n", src, b.Runs, s.medians[src])
		fmt.Printf("### Source %s, ratios to stock within each run\n\n%s\n", src, s.ratios[src])
		fmt.Printf("### Source %s, where the threads blocked: the most sampled kernel stacks over all runs\n\n%s\n",
			src, topStacks(b.Arms, s.stacks[src]))
	}
	return nil
}

// summary gathers the runs, per source.
type summary struct {
	medians map[string]*lab.Medians
	ratios  map[string]*lab.Targets
	// stacks are each arm's stack samples over all runs, by arm and
	// task name.
	stacks map[string]map[string]lab.Stacks
	alone  *lab.Medians
}

// settleBound is the slowest write+fdatasync of a settled disk: four times
// the log's p99 alone, and at least 2 ms; 10 ms without the victims alone.
func settleBound(solo victims) time.Duration {
	if solo.sync.Ops == 0 {
		return 10 * time.Millisecond
	}
	return max(4*solo.sync.Latency.P99, 2*time.Millisecond)
}
