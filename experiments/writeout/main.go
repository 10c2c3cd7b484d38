// Command writeout measures the shape of memcgd's targeted write-out and
// what it does to a neighbour: an unpaced writer fills a cgroup limited to
// -limit, with memcgd's rule dirty_bytes -dirty-bytes and
// dirty_background_bytes -dirty-background-bytes for it, so that memcgd
// holds gigabytes dirty and writes them out; meanwhile a neighbour in a
// cgroup of its own, on the same filesystem, appends 4 KiB and calls
// fdatasync in a loop (fio, -window long). Per arm it reports:
//
//   - the daemon's sync_file_range calls (perf trace, system-wide, the
//     daemon's threads only): how many, and their durations; and the
//     write-outs, each the calls that follow one another within 200 µs
//     (the chunks of one write-out run back to back, and write-outs come
//     at the cgroup's steps, a millisecond or more apart);
//   - the device's busy share (io_ticks of /sys/block/DEV/stat) and write
//     rate over the window;
//   - the neighbour's fdatasyncs: how many per second, p50, p99 and max.
//
// The arms are those of -arms, and "before" when -before names a memcgd
// binary built from an earlier revision: the same workload against the
// earlier write-out.
//
//	go run ./experiments/writeout [-size 16G] [-limit 8G] [-dirty-bytes 2G] [-dirty-background-bytes 1G] [-window 8s] [-before BIN] [-arms stock,memcgd] [-runs 1]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/memcgd/memcgd/experiments/internal/lab"
	"github.com/memcgd/memcgd/memcg"
)

func main() {
	f := lab.Flags{VMDefaults: map[string]string{"size": "2G", "limit": "1G", "dirty-bytes": "256M", "dirty-background-bytes": "128M"}}
	f.Register(flag.CommandLine)
	e := experiment{size: 16 << 30, limit: 8 << 30, dirty: 2 << 30, background: 1 << 30}
	flag.Var(&e.size, "size", "bytes the writer may write (it is stopped at the end of the window)")
	flag.Var(&e.limit, "limit", "memory limit of the writer's cgroup")
	flag.Var(&e.dirty, "dirty-bytes", "memcgd dirty_bytes of the writer's cgroup")
	flag.Var(&e.background, "dirty-background-bytes", "memcgd dirty_background_bytes of the writer's cgroup")
	flag.DurationVar(&e.window, "window", 8*time.Second, "how long the neighbour's fdatasync loop runs, the measurement window")
	flag.DurationVar(&e.lead, "lead", time.Second, "how long the writer runs before the window opens")
	flag.StringVar(&e.before, "before", "", "a memcgd binary of an earlier revision: adds the arm \"before\", run like memcgd")
	flag.Parse()
	if e.window <= 0 || e.lead < 0 {
		fmt.Fprintf(os.Stderr, "-window %v, -lead %v: want a positive window and a lead of 0 or more\n", e.window, e.lead)
		os.Exit(2)
	}
	lab.Main("./experiments/writeout", f, e.run)
}

type experiment struct {
	size, limit, dirty, background lab.Size
	window, lead                   time.Duration
	before                         string
}

// arm is a way of running the workload: an arm of -arms, or "before".
type arm struct {
	lab.Arm
	bin string // the daemon binary; "" for the bench's
}

// result is what one arm measured.
type result struct {
	calls    lab.Series // sync_file_range durations, µs
	ops      lab.Series // write-out durations, µs
	disk     lab.DiskActivity
	victim   victim
	daemon   lab.DaemonResult
	perfNote string // why calls are not measured, or ""
}

func (e experiment) run(ctx context.Context, b *lab.Bench) error {
	arms := []arm{}
	for _, a := range b.Arms {
		arms = append(arms, arm{Arm: a})
		if !a.Daemon && e.before != "" {
			arms = append(arms, arm{Arm: lab.Arm{Name: "before", Daemon: true}, bin: e.before})
		}
	}
	if _, err := exec.LookPath("fio"); err != nil {
		return fmt.Errorf("the neighbour's loop needs fio: %w", err)
	}
	fmt.Printf("Writer: unpaced, 1 MiB writes, in a cgroup limited to %s; memcgd rule dirty_bytes %s, dirty_background_bytes %s.\n"+
		"Neighbour: fio, 4 KiB appends each followed by fdatasync, for %v, starting %v after the writer, same filesystem.\n\n",
		memcg.FormatSize(uint64(e.limit)), memcg.FormatSize(uint64(e.dirty)), memcg.FormatSize(uint64(e.background)), e.window, e.lead)
	var names []string
	for _, a := range arms {
		names = append(names, a.Name)
	}
	medians := lab.NewMedians(names...)
	for run := 1; run <= b.Runs; run++ {
		rs := make([]result, len(arms))
		for _, i := range lab.Order(run, len(arms)) {
			r, err := e.arm(ctx, b, fmt.Sprintf("%d-%s", run, arms[i].Name), arms[i])
			if err != nil {
				return fmt.Errorf("arm %s: %w", arms[i].Name, err)
			}
			rs[i] = r
		}
		order := make([]lab.Arm, len(arms))
		for i, a := range arms {
			order[i] = a.Arm
		}
		fmt.Printf("### run %d (%s)\n\n%s\n", run, lab.OrderText(run, order), table(names, rs, medians))
		for i, r := range rs {
			if r.perfNote != "" {
				fmt.Printf("%s: sync_file_range not measured: %s\n", names[i], r.perfNote)
			}
		}
	}
	if b.Runs > 1 {
		fmt.Printf("### medians of %d runs\n\n%s\n", b.Runs, medians)
	}
	return nil
}

// table is the arms' figures side by side; m gathers them over the runs.
func table(names []string, rs []result, m *lab.Medians) string {
	t := lab.NewCompare(names...)
	num := func(name, format string, f func(result) float64) {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		t.Num(name, format, v...)
		m.Num(name, format, v...)
	}
	ms := func(s lab.Series, p float64) float64 {
		if len(s) == 0 {
			return math.NaN()
		}
		return float64(s.Percentile(p)) / 1e3
	}
	num("daemon sync_file_range calls", "%.0f", func(r result) float64 { return float64(len(r.calls)) })
	num("  call p50 (ms)", "%.3f", func(r result) float64 { return ms(r.calls, 50) })
	num("  call p99 (ms)", "%.3f", func(r result) float64 { return ms(r.calls, 99) })
	num("  call max (ms)", "%.3f", func(r result) float64 { return ms(r.calls, 100) })
	num("write-outs (calls within 200 µs)", "%.0f", func(r result) float64 { return float64(len(r.ops)) })
	num("  write-out p50 (ms)", "%.3f", func(r result) float64 { return ms(r.ops, 50) })
	num("  write-out p99 (ms)", "%.3f", func(r result) float64 { return ms(r.ops, 99) })
	num("  write-out max (ms)", "%.3f", func(r result) float64 { return ms(r.ops, 100) })
	num("device busy (%)", "%.1f", func(r result) float64 { return r.disk.BusyPercent() })
	num("device write (MiB/s)", "%.0f", func(r result) float64 { return r.disk.WriteMiBps() })
	num("neighbour fdatasyncs per s", "%.0f", func(r result) float64 { return r.victim.perSecond() })
	num("  fdatasync p50 (ms)", "%.2f", func(r result) float64 { return r.victim.p50 })
	num("  fdatasync p99 (ms)", "%.2f", func(r result) float64 { return r.victim.p99 })
	num("  fdatasync max (ms)", "%.2f", func(r result) float64 { return r.victim.max })
	field := func(name string) func(result) float64 {
		return func(r result) float64 {
			v, ok := r.daemon.Fields[name]
			if !ok {
				return math.NaN()
			}
			return float64(v)
		}
	}
	num("memcgd writeout_targeted", "%.0f", field("writeout_targeted"))
	num("memcgd throttle_pauses", "%.0f", field("throttle_pauses"))
	return t.String()
}

// arm runs the workload once with a.
func (e experiment) arm(ctx context.Context, b *lab.Bench, name string, a arm) (r result, err error) {
	if err := lab.DropCaches(); err != nil {
		return r, err
	}
	c, err := b.Cgroup(nil, "writer-"+name, lab.CgroupOptions{Limit: uint64(e.limit), Mirror: true})
	if err != nil {
		return r, err
	}
	nb, err := b.Cgroup(nil, "neighbour-"+name, lab.CgroupOptions{})
	if err != nil {
		return r, err
	}
	config := fmt.Sprintf("version: 1\nmanage: {under: %s, limited_only: true}\ndefaults: {dirty_bytes: %d, dirty_background_bytes: %d}\n",
		b.Root.Path, uint64(e.dirty), uint64(e.background))
	var d *lab.Daemon
	switch {
	case a.bin != "":
		if d, err = b.StartDaemon(ctx, lab.DaemonOptions{Bin: a.bin, Config: config,
			Args: append(strings.Fields(b.DaemonArgs), a.Args...), Nice: b.Nice}); err == nil {
			err = d.Await(ctx, c.Path)
		}
	default:
		d, err = b.StartArm(ctx, a.Arm, config, c)
	}
	if err != nil {
		return r, err
	}
	trace, err := startTrace(ctx, b.Temp("perf-"+name))
	if err != nil {
		r.perfNote = err.Error()
	}
	wctx, stopWriter := context.WithCancel(ctx)
	file := b.File("writeout-" + name)
	w := c.Command(wctx, b.Writer, "-file", file, "-size", strconv.FormatUint(uint64(e.size), 10), "-rate", "0", "-chunk", strconv.Itoa(1<<20))
	w.Cancel = func() error { return w.Process.Signal(syscall.SIGKILL) }
	if err := w.Start(); err != nil {
		stopWriter()
		return r, fmt.Errorf("writer: %w", err)
	}
	written := make(chan error, 1)
	go func() { written <- w.Wait() }()
	select {
	case <-time.After(e.lead):
	case err := <-written:
		stopWriter()
		return r, fmt.Errorf("writer ended within the lead: %v", err)
	}
	d.BusyStart()
	disk0 := b.Disk()
	r.victim, err = runVictim(ctx, nb, b.File("neighbour-"+name), e.window)
	r.disk = b.Disk().Sub(disk0)
	d.BusyEnd()
	stopWriter()
	<-written
	if trace != nil {
		if r.calls, r.ops, err = trace.stop(); err != nil {
			r.perfNote = err.Error()
		}
	}
	if err != nil && r.perfNote == "" {
		return r, err
	}
	if r.daemon, err = b.EndArm(ctx, d, c); err != nil {
		return r, err
	}
	for _, cg := range []*lab.Cgroup{c, nb} {
		if err := b.Remove(cg); err != nil {
			return r, err
		}
	}
	return r, errors.Join(os.Remove(file), os.Remove(b.File("neighbour-"+name)))
}

// victim is what the neighbour's fdatasync loop measured.
type victim struct {
	syncs         uint64
	runtime       time.Duration
	p50, p99, max float64 // ms
}

func (v victim) perSecond() float64 {
	if v.runtime <= 0 {
		return math.NaN()
	}
	return float64(v.syncs) / v.runtime.Seconds()
}

// runVictim runs fio in c for window: 4 KiB appends to file, each
// followed by fdatasync, with no preallocation, so that each sync commits
// the file's new size and blocks through the journal.
func runVictim(ctx context.Context, c *lab.Cgroup, file string, window time.Duration) (victim, error) {
	cmd := c.Command(ctx, "fio", "--name=neighbour", "--filename="+file, "--rw=write", "--bs=4k", "--fdatasync=1",
		"--size=4G", "--fallocate=none", "--ioengine=sync", "--time_based",
		"--runtime="+strconv.FormatInt(window.Milliseconds(), 10)+"ms", "--output-format=json")
	out, _, err := lab.Run(cmd)
	if err != nil {
		return victim{}, fmt.Errorf("neighbour: %w", err)
	}
	var rep struct {
		Jobs []struct {
			Runtime int64 `json:"job_runtime"` // ms
			Sync    struct {
				Lat struct {
					N          uint64             `json:"N"`
					Max        float64            `json:"max"`
					Percentile map[string]float64 `json:"percentile"`
				} `json:"lat_ns"`
			} `json:"sync"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(out, &rep); err != nil || len(rep.Jobs) != 1 {
		return victim{}, fmt.Errorf("neighbour: fio's report %.200q: %v", out, err)
	}
	j := rep.Jobs[0]
	return victim{syncs: j.Sync.Lat.N, runtime: time.Duration(j.Runtime) * time.Millisecond,
		p50: j.Sync.Lat.Percentile["50.000000"] / 1e6, p99: j.Sync.Lat.Percentile["99.000000"] / 1e6, max: j.Sync.Lat.Max / 1e6}, nil
}

// trace is a perf trace of every sync_file_range on the host.
type trace struct {
	cmd  *exec.Cmd
	out  string
	done chan error
}

// startTrace starts perf trace, writing to out.
func startTrace(ctx context.Context, out string) (*trace, error) {
	if _, err := exec.LookPath("perf"); err != nil {
		return nil, fmt.Errorf("no perf: %w", err)
	}
	cmd := exec.CommandContext(ctx, "perf", "trace", "-a", "-e", "sync_file_range", "-o", out)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("perf trace: %w", err)
	}
	t := &trace{cmd: cmd, out: out, done: make(chan error, 1)}
	go func() { t.done <- cmd.Wait() }()
	// perf opens its events before it writes its first line; a moment
	// lets it do so before the workload begins.
	time.Sleep(500 * time.Millisecond)
	return t, nil
}

// traceLine is perf trace's line for a system call: start (ms since the
// trace began), duration (ms), command/tid.
var traceLine = regexp.MustCompile(`^\s*([0-9.]+) \(\s*([0-9.]+) ms\): ([^/]+)/([0-9]+) sync_file_range\(`)

// opGap is the longest pause between two calls of one write-out.
const opGap = 200 * time.Microsecond

// stop ends the trace and returns the daemon's calls' durations and its
// write-outs' (µs).
func (t *trace) stop() (calls, ops lab.Series, err error) {
	_ = t.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-t.done:
	case <-time.After(10 * time.Second):
		_ = t.cmd.Process.Kill()
		<-t.done
	}
	f, err := os.Open(t.out)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	type call struct{ start, end float64 } // ms
	var cs []call
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := traceLine.FindStringSubmatch(sc.Text())
		if m == nil || !strings.HasPrefix(m[3], "memcgd") {
			continue
		}
		start, err1 := strconv.ParseFloat(m[1], 64)
		dur, err2 := strconv.ParseFloat(m[2], 64)
		if err1 != nil || err2 != nil || dur < 0 || dur > 1e6 {
			continue // not a duration perf measured
		}
		// perf prints a call when it ends, stamped with its start.
		cs = append(cs, call{start, start + dur})
		calls = append(calls, uint64(dur*1e3))
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	slices.SortFunc(cs, func(a, b call) int { return int(math.Copysign(1, a.start-b.start)) })
	gap := float64(opGap) / float64(time.Millisecond)
	for i := 0; i < len(cs); {
		start, end := cs[i].start, cs[i].end
		j := i + 1
		for ; j < len(cs) && cs[j].start-end < gap; j++ {
			end = max(end, cs[j].end)
		}
		ops = append(ops, uint64((end-start)*1e3))
		i = j
	}
	return calls, ops, nil
}
