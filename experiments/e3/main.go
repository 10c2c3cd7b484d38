// Command e3 is seed 000's experiment (memcg-first writeback on reclaim, Li
// RongQing 2018), scaled to one machine: many memory cgroups, a fraction of
// them each holding dirty pages of a file of its own, and one cgroup with a
// small limit writing sequentially with fio. Reclaim in the writer's cgroup
// meets its dirty pages; the stock kernel then wakes the flusher of the
// whole device (mm/vmscan.c shrink_inactive_list → wakeup_flusher_threads),
// writing the other cgroups' pages too. One run per arm (-arms), and with
// -full-flush one more:
//
//   - stock: no memcgd;
//   - memcgd, writeback_first true: its reclaim writes out the writer's own
//     files first (seed 000), with the eBPF dirty tracker where it loads;
//   - fallback: the same with the tracker disabled;
//   - memcgd, writeback_first false (-full-flush): its reclaim falls back
//     to the full flush every time.
//
// It reports fio's throughput and the bytes of the other cgroups' dirty
// pages written out during the run (their dirty at the start minus their
// dirty at the end, from memory.stat; nothing else writes to them).
//
// Where fio is not installed (the test VM has only busybox), the paced
// writer (experiments/writer) writes in its place, in -bs chunks at
// -fio-rate: buffered write(2)s as fio's job makes them; the output says so.
//
//	go run ./experiments/e3 [-n 1000] [-fraction 0.1] [-fio-size 2G] [-runs 3] [-arms stock,memcgd,fallback] [-full-flush]
//	go run ./experiments/e3 -vm v2     # in a cgroup v2 test VM, sizes scaled to it
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/memcgd/memcgd/experiments/internal/lab"
	"github.com/memcgd/memcgd/memcg"
)

func main() {
	// In the VM (a 50 MB/s disk, a guest several times slower than the
	// host, 3 GiB): fewer cgroups and less data, so that a run ends well
	// within dirty_expire_centisecs of the others' dirtying.
	f := lab.Flags{VMDefaults: map[string]string{"n": "200", "fio-size": "256M"}}
	f.Register(flag.CommandLine)
	e := experiment{dirtyEach: 1 << 20, limit: 100 << 20, fioSize: 2 << 30, bs: 16 << 10}
	flag.IntVar(&e.n, "n", 1000, "number of cgroups (the seed used 10000)")
	flag.Float64Var(&e.fraction, "fraction", 0.1, "fraction of the cgroups that hold dirty pages")
	flag.Var(&e.dirtyEach, "dirty-each", "dirty bytes each of those cgroups holds")
	flag.Var(&e.limit, "limit", "memory limit of fio's cgroup")
	flag.Var(&e.fioSize, "fio-size", "bytes fio writes")
	flag.Var(&e.bs, "bs", "fio block size")
	flag.Var(&e.fioRate, "fio-rate", "fio's rate limit, bytes per second (fio --rate); 0, the seed's run, is unpaced")
	flag.BoolVar(&e.fullFlush, "full-flush", false, "also run memcgd with writeback_first false (its reclaim's full flush)")
	flag.StringVar(&e.defaults, "defaults", "dirty_ratio: 10, dirty_background_ratio: 5, min_free_kbytes: auto",
		"memcgd's config defaults but writeback_first, which each run sets, as a YAML flow mapping's contents (the default is the embedded policy's)")
	flag.Parse()
	lab.Main("./experiments/e3", f, e.run)
}

type experiment struct {
	n                         int
	fraction                  float64
	dirtyEach, limit, fioSize lab.Size
	bs, fioRate               lab.Size
	defaults                  string
	fullFlush                 bool
	// tool is "fio", or "writer" when fio is not installed.
	tool string
}

// variant is one of the runs of a repetition.
type variant struct {
	name string
	// arm says whether and how memcgd runs; wbFirst is its writeback_first.
	arm     lab.Arm
	wbFirst bool
}

// variants are the runs of a repetition, stock first: the arms, each
// memcgd arm with writeback_first true, and with fullFlush memcgd with
// writeback_first false.
func variants(arms []lab.Arm, fullFlush bool) []variant {
	var out []variant
	for _, a := range arms {
		switch {
		case !a.Daemon:
			out = append(out, variant{name: "stock (no memcgd)", arm: a})
		default:
			out = append(out, variant{name: a.Name + ", writeback_first true", arm: a, wbFirst: true})
		}
	}
	if fullFlush {
		out = append(out, variant{name: "memcgd, writeback_first false (full flush)", arm: lab.Memcgd})
	}
	return out
}

// result is what one run measured.
type result struct {
	fioBW           float64 // bytes/s
	dirtyStart, out uint64  // others' dirty at the start, and written out during the run
	age             time.Duration
	// atLimit is when fio's cgroup first came within 1 MiB of its limit,
	// and firstOut when the others' dirty bytes first fell by 1 MiB, both
	// since fio started; -1 if never.
	atLimit, firstOut time.Duration
	daemon            lab.DaemonResult
	// disk is the device during fio's run.
	disk lab.DiskActivity
	// attempts is how many attempts the run took (see errDisturbed).
	attempts int
}

func (e experiment) run(ctx context.Context, b *lab.Bench) error {
	e.tool = "fio"
	if _, err := exec.LookPath("fio"); err != nil {
		e.tool = "writer"
		fmt.Printf("fio is not installed here: in its place experiments/writer writes %s in %s write(2)s, %s; "+
			"the columns named fio are the writer's.\n\n", e.fioSize.String(), e.bs.String(), rateText(e.fioRate))
	}
	if e.n < 1 {
		return fmt.Errorf("-n: invalid value %d: want at least 1", e.n)
	}
	if e.fraction <= 0 || e.fraction > 1 {
		return fmt.Errorf("-fraction: invalid value %g: want a number in (0, 1]", e.fraction)
	}
	k := int(math.Ceil(float64(e.n) * e.fraction))
	vm, err := lab.ReadVMDirty()
	if err != nil {
		return err
	}
	mi, err := lab.MemInfo()
	if err != nil {
		return err
	}
	// The others' pages must stay dirty unless someone writes them: keep
	// them, plus what fio's cgroup can hold, under half the global
	// background threshold, so the kernel's own background writeback
	// (wb_over_bg_thresh) never starts.
	bg := vm.BackgroundThresh(mi["MemAvailable"])
	total := uint64(k) * uint64(e.dirtyEach)
	if total+uint64(e.limit) > bg/2 {
		return fmt.Errorf("-n %d -fraction %g -dirty-each %s: %s of dirty pages plus fio's %s limit exceed half the global "+
			"dirty background threshold (%s): the kernel would write them out on its own; want less",
			e.n, e.fraction, e.dirtyEach.String(), memcg.FormatSize(total), e.limit.String(), memcg.FormatSize(bg))
	}
	expire := time.Duration(vm.ExpireCentisecs) * 10 * time.Millisecond
	pace := rateText(e.fioRate)
	fmt.Printf("%d cgroups beneath %s, %d of them holding %s dirty each (%s in all; global background threshold about %.0f MiB); "+
		"fio writes %s in %s blocks, %s, in a cgroup limited to %s. Dirty pages older than %v are written by the flusher on its own.\n"+
		"memcgd config defaults: {%s, writeback_first: true or false}, managing only %s.\n\n",
		e.n, b.Root.Path, k, e.dirtyEach.String(), memcg.FormatSize(total), lab.MiB(bg),
		e.fioSize.String(), e.bs.String(), pace, e.limit.String(), expire, e.defaults, b.Root.Path)

	start := time.Now()
	cgs := make([]*lab.Cgroup, e.n)
	for i := range cgs {
		if cgs[i], err = b.Cgroup(nil, fmt.Sprintf("c%05d", i), lab.CgroupOptions{}); err != nil {
			return err
		}
	}
	fmt.Printf("Created %d cgroups in %.1f s.\n\n", e.n, time.Since(start).Seconds())
	dirty := cgs[:k]

	vs := variants(b.Arms, e.fullFlush)
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.name
	}
	medians := lab.NewMedians(names...)
	var targets lab.Targets
	for run := 1; run <= b.Runs; run++ {
		t := lab.Table{Header: []string{"variant", "fio MiB/s", "vs stock", "others' dirty at start (MiB)",
			"others' written out during the run (MiB)", "share written out", "fio's cgroup first at its limit (s)",
			"others' dirty first down 10% (s)", "age of oldest dirty page at end (s)",
			"memcgd targeted write-outs", "memcgd full flushes", "dirty tracker", "memcgd ready after (s)",
			"memcgd CPU during fio (% of one core)", "memcgd CPU (s)", "device busy during fio (%)", "device write rate during fio (MiB/s)", "attempts"}}
		// Rotate the order between repetitions; report in the fixed order.
		results := make([]result, len(vs))
		var order []string
		for j := range vs {
			vi := (j + run - 1) % len(vs)
			order = append(order, vs[vi].name)
			if results[vi], err = e.once(ctx, b, run, vs[vi], dirty); err != nil {
				return err
			}
		}
		stock := results[0]
		for i, v := range vs {
			r := results[i]
			vsStock := "—"
			if v.arm.Daemon {
				vsStock = lab.Change(stock.fioBW, r.fioBW)
			}
			note := ""
			if r.age > expire {
				note = " (past dirty_expire: kupdate may have written some)"
			}
			share := "n/a"
			if r.dirtyStart > 0 {
				share = fmt.Sprintf("%.1f%%", float64(r.out)/float64(r.dirtyStart)*100)
			}
			tracker := "—"
			if r.daemon.Fields != nil {
				tracker = r.daemon.Tracker()
			}
			t.Add(v.name, fmt.Sprintf("%.1f", lab.MiB(uint64(r.fioBW))), vsStock,
				fmt.Sprintf("%.1f", lab.MiB(r.dirtyStart)), fmt.Sprintf("%.1f", lab.MiB(r.out)), share,
				seconds(r.atLimit), seconds(r.firstOut), fmt.Sprintf("%.1f%s", r.age.Seconds(), note),
				counter(r.daemon, "writeout_targeted"), counter(r.daemon, "writeout_flush"), tracker, startup(r.daemon),
				busy(r.daemon), cpu(r.daemon), lab.FormatNum("%.1f", r.disk.BusyPercent()), lab.FormatNum("%.1f", r.disk.WriteMiBps()), strconv.Itoa(r.attempts))
		}
		fmt.Printf("### Run %d (order: %s)\n\n%s\n", run, strings.Join(order, "; "), t.String())

		num := func(name, format string, f func(result) float64) {
			v := make([]float64, len(results))
			for i, r := range results {
				v[i] = f(r)
			}
			medians.Num(name, format, v...)
		}
		num("fio MiB/s", "%.1f", func(r result) float64 { return lab.MiB(uint64(r.fioBW)) })
		num("others' dirty at start (MiB)", "%.1f", func(r result) float64 { return lab.MiB(r.dirtyStart) })
		num("others' written out during the run (MiB)", "%.1f", func(r result) float64 { return lab.MiB(r.out) })
		num("memcgd targeted write-outs", "%.0f", func(r result) float64 { return float64(r.daemon.Fields["writeout_targeted"]) })
		num("memcgd full flushes", "%.0f", func(r result) float64 { return float64(r.daemon.Fields["writeout_flush"]) })
		num("memcgd time its pace held fio (ms; summed over CPUs)", "%.0f", func(r result) float64 { return float64(r.daemon.Fields["throttle_pace_held_us"]) / 1e3 })
		num("device busy during fio (%)", "%.1f", func(r result) float64 { return r.disk.BusyPercent() })
		num("device write rate during fio (MiB/s)", "%.1f", func(r result) float64 { return r.disk.WriteMiBps() })
		num("memcgd CPU during fio (% of one core)", "%.1f", func(r result) float64 {
			if r.daemon.Busy < 0 {
				return math.NaN() // no daemon
			}
			return r.daemon.Busy * 100
		})
		num("  of it in write-out, flush and reclaim calls (% of one core)", "%.1f", func(r result) float64 { return r.daemon.KernelWorkPercent() })
		num("memcgd steps (looks at a cgroup), a second", "%.0f", func(r result) float64 { return r.daemon.StepRate() })
		for i := 1; i < len(vs); i++ {
			r := results[i]
			fewer := math.NaN()
			if stock.out > 0 {
				fewer = (float64(stock.out) - float64(r.out)) / float64(stock.out) * 100
			}
			name := vs[i].name
			targets.Add("E3 unpaced: others' dirty bytes written out ≥ 95% fewer than stock", name, "%.1f%%",
				func(v float64) bool { return v >= 95 }, fewer)
			targets.Add("E3 unpaced: fio throughput ≥ 0.95 × stock", name, "%.3f", func(v float64) bool { return v >= 0.95 }, r.fioBW/stock.fioBW)
			cpu := math.NaN()
			if r.daemon.Busy >= 0 {
				cpu = r.daemon.Busy * 100
			}
			targets.Add("E3: daemon CPU during fio ≤ 10% of one core", name, "%.1f%%", func(v float64) bool { return v <= 10 }, cpu)
		}
	}
	fmt.Printf("### Medians of %d runs\n\n%s\n", b.Runs, medians)
	fmt.Printf("### Targets (issues 7 and 16), medians of %d runs\n\n%s\n", b.Runs, targets.String())
	return nil
}

// busy is the daemon's CPU use while fio ran, in percent of one core.
func busy(d lab.DaemonResult) string {
	if d.Fields == nil || d.Busy < 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f", d.Busy*100)
}

// rateText describes a writer's rate.
func rateText(rate lab.Size) string {
	if rate == 0 {
		return "unpaced"
	}
	return "paced at " + rate.String() + "/s"
}

// seconds prints a time since fio started, "never" for -1.
func seconds(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("%.2f", d.Seconds())
}

func startup(d lab.DaemonResult) string {
	if d.Fields == nil {
		return "—"
	}
	return fmt.Sprintf("%.1f", d.Startup.Seconds())
}

// cpu is the daemon's user+sys time over its life (startup included).
func cpu(d lab.DaemonResult) string {
	if d.Fields == nil {
		return "—"
	}
	return fmt.Sprintf("%.2f", (d.Usage.User + d.Usage.Sys).Seconds())
}

func counter(d lab.DaemonResult, name string) string {
	if d.Fields == nil {
		return "—"
	}
	return strconv.FormatUint(d.Fields[name], 10)
}

// once does one run: dirty the others' files, start memcgd if the variant
// has it, run fio in a fresh limited cgroup, and measure.
func (e experiment) once(ctx context.Context, b *lab.Bench, run int, v variant, dirty []*lab.Cgroup) (result, error) {
	for attempt := 1; ; attempt++ {
		r, err := e.attempt(ctx, b, fmt.Sprintf("%d-%s-%t-%d", run, v.arm.Name, v.wbFirst, attempt), v, dirty)
		r.attempts = attempt
		if !errors.Is(err, errDisturbed) || attempt == maxAttempts {
			return r, err
		}
		fmt.Printf("(%s, run %d: %v; again)\n", v.name, run, err)
	}
}

// maxAttempts bounds the attempts at a run whose precondition failed.
const maxAttempts = 5

// errDisturbed reports that the others' dirty pages were written before
// fio started: by another tenant's sync, or the daemon's start.
var errDisturbed = errors.New("the other cgroups' dirty pages were written out before fio started")

// attempt does one run; tag names its files and cgroup.
func (e experiment) attempt(ctx context.Context, b *lab.Bench, tag string, v variant, dirty []*lab.Cgroup) (r result, err error) {
	if err := lab.DropCaches(); err != nil {
		return r, err
	}
	dirtied := time.Now()
	var files []string
	defer func() {
		for _, f := range files {
			if rerr := os.Remove(f); rerr != nil && err == nil {
				err = rerr
			}
		}
	}()
	for i, c := range dirty {
		w := lab.Writer{Bin: b.Writer, File: b.File(fmt.Sprintf("e3-%s-other-%05d", tag, i)), Size: uint64(e.dirtyEach)}
		files = append(files, w.File)
		if _, _, err := w.Run(ctx, c); err != nil {
			return r, err
		}
	}
	dirtied0, err := sumDirty(b, dirty)
	if err != nil {
		return r, err
	}
	fc, err := b.Cgroup(nil, "fio-"+tag, lab.CgroupOptions{Limit: uint64(e.limit), Mirror: true})
	if err != nil {
		return r, err
	}
	cfg := fmt.Sprintf("version: 1\nmanage: {under: %s, limited_only: true}\ndefaults: {%s, writeback_first: %t}\n",
		b.Root.Path, e.defaults, v.wbFirst)
	d, err := b.StartArm(ctx, v.arm, cfg, fc)
	if err != nil {
		return r, err
	}
	if r.dirtyStart, err = sumDirty(b, dirty); err != nil {
		return r, err
	}
	// Against what was written, not what was still dirty after the
	// dirtying: another tenant's sync(2) during the dirtying would
	// otherwise pass unnoticed, and the run compare less with more.
	want := uint64(len(dirty)) * uint64(e.dirtyEach)
	if r.dirtyStart < want-want/10 {
		if _, err := b.EndArm(ctx, d, fc); err != nil {
			return r, err
		}
		if err := b.Remove(fc); err != nil {
			return r, err
		}
		return r, fmt.Errorf("%w (%.1f MiB written, %.1f MiB dirty after dirtying, %.1f MiB when fio was to start)",
			errDisturbed, lab.MiB(want), lab.MiB(dirtied0), lab.MiB(r.dirtyStart))
	}
	file := b.File("e3-" + tag + "-fio")
	files = append(files, file)
	// The lab's Root holds no task: its hierarchical dirty is the sum of
	// its children's, so Root minus fio's cgroup is the others'.
	sm := b.Sample(10*time.Millisecond, b.Root, fc)
	d.BusyStart()
	disk0 := b.Disk()
	if e.tool == "fio" {
		r.fioBW, err = e.fio(ctx, fc, file)
	} else {
		var res lab.WriterResult
		w := lab.Writer{Bin: b.Writer, File: file, Size: uint64(e.fioSize), Chunk: uint64(e.bs), Rate: uint64(e.fioRate)}
		res, _, err = w.Run(ctx, fc)
		r.fioBW = res.Throughput()
	}
	r.disk = b.Disk().Sub(disk0)
	d.BusyEnd()
	samples, serr := sm.Stop()
	if err != nil {
		return r, err
	}
	if serr != nil {
		return r, fmt.Errorf("sample: %w", serr)
	}
	r.atLimit, r.firstOut = timeline(samples, uint64(e.limit))
	end, err := sumDirty(b, dirty)
	if err != nil {
		return r, err
	}
	r.age = time.Since(dirtied)
	r.out = r.dirtyStart - min(end, r.dirtyStart)
	if r.daemon, err = b.EndArm(ctx, d, fc); err != nil {
		return r, err
	}
	return r, b.Remove(fc)
}

// timeline finds in the samples of (Root, fio's cgroup) when fio's cgroup
// first came within 1 MiB of limit and when the others' dirty bytes first
// fell by a tenth below their first sample; -1 for never. The two cgroups
// are read one after the other, so fio's dirty bytes can move in between
// and make the others' (Root's minus fio's) look lower for one sample: a
// fall counts only when the next sample confirms it.
func timeline(s lab.Samples, limit uint64) (atLimit, firstOut time.Duration) {
	atLimit, firstOut = -1, -1
	root, fio := s.Stats[0], s.Stats[1]
	if len(s.At) == 0 {
		return atLimit, firstOut
	}
	others := func(k int) uint64 { return root[k].Dirty - min(fio[k].Dirty, root[k].Dirty) }
	start := others(0)
	fell := func(k int) bool { return others(k) <= start-start/10 }
	for k, at := range s.At {
		if atLimit < 0 && fio[k].Usage+(1<<20) >= limit {
			atLimit = at
		}
		if firstOut < 0 && start > 0 && k+1 < len(s.At) && fell(k) && fell(k+1) {
			firstOut = at
		}
	}
	return atLimit, firstOut
}

// sumDirty sums the dirty bytes of cgs.
func sumDirty(b *lab.Bench, cgs []*lab.Cgroup) (uint64, error) {
	var sum uint64
	for _, c := range cgs {
		s, err := b.Observe(c)
		if err != nil {
			return 0, err
		}
		sum += s.Dirty
	}
	return sum, nil
}

// fio runs the seed's fio job in c and returns its write bandwidth,
// bytes per second.
func (e experiment) fio(ctx context.Context, c *lab.Cgroup, file string) (float64, error) {
	out, _, err := lab.Run(c.Command(ctx, "fio", "--name=e3", "--filename="+file, "--direct=0", "--iodepth=1",
		"--thread", "--rw=write", "--ioengine=libaio", "--bs="+strconv.FormatUint(uint64(e.bs), 10),
		"--size="+strconv.FormatUint(uint64(e.fioSize), 10), "--rate="+strconv.FormatUint(uint64(e.fioRate), 10),
		"--output-format=json"))
	if err != nil {
		return 0, fmt.Errorf("fio in %s: %w", c.Path, err)
	}
	var rep struct {
		Jobs []struct {
			Write struct {
				BWBytes float64 `json:"bw_bytes"`
			} `json:"write"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		return 0, fmt.Errorf("fio in %s: read its JSON report: %w", c.Path, err)
	}
	if len(rep.Jobs) != 1 {
		return 0, fmt.Errorf("fio in %s: report has %d jobs, want 1", c.Path, len(rep.Jobs))
	}
	return rep.Jobs[0].Write.BWBytes, nil
}
