package lab

import (
	"context"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SchedStat is a task's scheduler statistics (/proc/PID/task/TID/schedstat,
// kernel/sched/stats.c show_schedstat): time on a CPU, time runnable but
// waiting for one, and how many times it was put on a CPU. The kernel keeps
// them (CONFIG_SCHED_INFO) whatever kernel.sched_schedstats says.
type SchedStat struct {
	// Run is the time on a CPU.
	Run time.Duration `json:"run_ns"`
	// Wait is the time runnable on a run queue, waiting for a CPU.
	Wait time.Duration `json:"wait_ns"`
	// Slices is how many times the task was put on a CPU: each wake-up
	// and each preemption it came back from counts one.
	Slices uint64 `json:"slices"`
}

// Sub is s − t, field by field.
func (s SchedStat) Sub(t SchedStat) SchedStat {
	return SchedStat{Run: s.Run - t.Run, Wait: s.Wait - t.Wait, Slices: s.Slices - t.Slices}
}

// ReadSchedStat reads a schedstat file: /proc/thread-self/schedstat for
// the calling thread, /proc/PID/task/TID/schedstat for another.
func ReadSchedStat(path string) (SchedStat, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return SchedStat{}, err
	}
	s, err := parseSchedStat(string(b))
	if err != nil {
		return SchedStat{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// parseSchedStat parses the three fields of a schedstat file: nanoseconds
// on the CPU, nanoseconds waiting on a run queue, timeslices.
func parseSchedStat(s string) (SchedStat, error) {
	f := strings.Fields(s)
	if len(f) < 3 {
		return SchedStat{}, fmt.Errorf("schedstat %q: %d fields, want 3", s, len(f))
	}
	var v [3]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return SchedStat{}, fmt.Errorf("schedstat field %d %q: want a whole number", i+1, f[i])
		}
		v[i] = n
	}
	return SchedStat{Run: time.Duration(v[0]), Wait: time.Duration(v[1]), Slices: v[2]}, nil
}

// processSchedStat is the sum of the schedstat of process pid's threads.
// Unlike the rusage, it is read while the process runs, at nanosecond
// resolution; a thread that exited takes its time with it, so it can
// undercount across a thread's exit (rare in a Go daemon, whose runtime
// keeps its threads).
func processSchedStat(pid int) (SchedStat, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return SchedStat{}, fmt.Errorf("schedstat of %d: %w", pid, err)
	}
	var sum SchedStat
	for _, t := range tasks {
		s, err := ReadSchedStat(filepath.Join(dir, t.Name(), "schedstat"))
		if os.IsNotExist(err) {
			continue // the thread exited meanwhile
		}
		if err != nil {
			return SchedStat{}, fmt.Errorf("schedstat of %d: %w", pid, err)
		}
		sum.Run += s.Run
		sum.Wait += s.Wait
		sum.Slices += s.Slices
	}
	return sum, nil
}

// cpuTime is the CPU time process pid's threads have used (processSchedStat).
func cpuTime(pid int) (time.Duration, error) {
	s, err := processSchedStat(pid)
	return s.Run, err
}

// busyMark is a reading of a process's scheduler statistics and the wall
// clock.
type busyMark struct {
	sched SchedStat
	at    time.Time
	ok    bool
	// calls is its memcgd_host_call_cpu_seconds_total by call, counts
	// its memcgd_host_calls_total, and late its
	// memcgd_timer_lateness_seconds buckets, read from its metrics
	// outside the interval; nil if unread.
	calls, counts map[string]float64
	late          map[float64]float64
	// runtime is its Go runtime's counters (runtimeFamilies) by name;
	// nil if unread.
	runtime map[string]float64
}

// runtimeFamilies are the Go runtime's counters busyMark reads: garbage
// collections, and bytes allocated.
var runtimeFamilies = []string{"go_gc_duration_seconds_count", "go_memstats_alloc_bytes_total"}

// BusyStart marks the start of the workload whose daemon CPU use EndArm
// reports (DaemonResult.Busy); BusyEnd marks its end. Both do nothing on
// a nil Daemon (the stock arm). A failed reading leaves Busy unmeasured.
func (d *Daemon) BusyStart() {
	if d != nil {
		calls, counts, late, rt := d.scrape()
		d.busyFrom = d.mark()
		d.busyFrom.calls, d.busyFrom.counts, d.busyFrom.late, d.busyFrom.runtime = calls, counts, late, rt
	}
}

// BusyEnd marks the end of the workload; see BusyStart.
func (d *Daemon) BusyEnd() {
	if d != nil {
		d.busyTo = d.mark()
		d.busyTo.calls, d.busyTo.counts, d.busyTo.late, d.busyTo.runtime = d.scrape()
	}
}

// scrape reads the daemon's CPU time in host calls, and how many it made,
// by call, its loop's timer lateness, and its Go runtime's counters,
// from its metrics (memcgd_host_call_cpu_seconds_total,
// memcgd_host_calls_total, memcgd_timer_lateness_seconds,
// runtimeFamilies); nil if unread.
func (d *Daemon) scrape() (cpu, counts map[string]float64, late map[float64]float64, runtime map[string]float64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	text, err := d.Metrics(ctx)
	if err != nil {
		return nil, nil, nil, nil
	}
	return parseByCall(text, "memcgd_host_call_cpu_seconds_total"), parseByCall(text, "memcgd_host_calls_total"),
		parseBuckets(text, "memcgd_timer_lateness_seconds"), parseUnlabelled(text, runtimeFamilies)
}

// parseUnlabelled takes the samples of families without labels from a
// metrics page, by family.
func parseUnlabelled(text string, families []string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok || !slices.Contains(families, name) {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[name] = v
		}
	}
	return out
}

// runtimeRates are the daemon's garbage collections a second and bytes
// allocated per step between BusyStart and BusyEnd, −1 when unread.
func (d *Daemon) runtimeRates() (gcs, allocPerStep float64) {
	from, to := d.busyFrom, d.busyTo
	gcs, allocPerStep = -1, -1
	if from.runtime == nil || to.runtime == nil || !to.at.After(from.at) {
		return gcs, allocPerStep
	}
	secs := to.at.Sub(from.at).Seconds()
	if n0, ok := from.runtime["go_gc_duration_seconds_count"]; ok {
		gcs = (to.runtime["go_gc_duration_seconds_count"] - n0) / secs
	}
	if a0, ok := from.runtime["go_memstats_alloc_bytes_total"]; ok {
		if steps := d.stepRate() * secs; steps > 0 {
			allocPerStep = (to.runtime["go_memstats_alloc_bytes_total"] - a0) / steps
		}
	}
	return gcs, allocPerStep
}

// parseByCall takes family{call="..."} from a metrics page, by call.
func parseByCall(text, family string) map[string]float64 {
	out := map[string]float64{}
	for call, v := range samples(text, family+`{call="`) {
		out[call] = v
	}
	return out
}

// samples yields the label value and the sample's value of each line of
// a metrics page that begins with prefix, a family's name and its one
// label up to the opening quote of the value.
func samples(text, prefix string) iter.Seq2[string, float64] {
	return func(yield func(string, float64) bool) {
		for _, line := range strings.Split(text, "\n") {
			rest, ok := strings.CutPrefix(line, prefix)
			if !ok {
				continue
			}
			label, value, ok := strings.Cut(rest, `"} `)
			if !ok {
				continue
			}
			v, err := strconv.ParseFloat(value, 64)
			if err == nil && !yield(label, v) {
				return
			}
		}
	}
}

// KernelWorkCalls are the host calls whose CPU time is mostly the
// kernel's work done on the daemon's threads: submitting writeback,
// reclaiming.
var KernelWorkCalls = []string{"write out", "flush", "reclaim"}

// kernelWork is the daemon's CPU use in KernelWorkCalls between BusyStart
// and BusyEnd (1 is one core), −1 when unread.
func (d *Daemon) kernelWork() float64 {
	from, to := d.busyFrom, d.busyTo
	if from.calls == nil || to.calls == nil || !to.at.After(from.at) {
		return -1
	}
	var s float64
	for _, c := range KernelWorkCalls {
		s += to.calls[c] - from.calls[c]
	}
	return s / to.at.Sub(from.at).Seconds()
}

// stepRate is how many steps (observe calls) a second the daemon made
// between BusyStart and BusyEnd, −1 when unread.
func (d *Daemon) stepRate() float64 {
	from, to := d.busyFrom, d.busyTo
	n0, ok0 := from.counts["observe"]
	n1, ok1 := to.counts["observe"]
	if !ok0 || !ok1 || !to.at.After(from.at) {
		return -1 // unread, or a daemon without memcgd_host_calls_total
	}
	return (n1 - n0) / to.at.Sub(from.at).Seconds()
}

// CallRate is how often the daemon carried out one kind of host call
// between BusyStart and BusyEnd, and the CPU time each took on average
// (memcgd_host_calls_total, memcgd_host_call_cpu_seconds_total).
type CallRate struct {
	PerSecond float64
	CPUEach   time.Duration
}

// callRates is the daemon's CallRate of each call it made between
// BusyStart and BusyEnd, by the call's name; nil when unread.
func (d *Daemon) callRates() map[string]CallRate {
	return callRates(d.busyFrom, d.busyTo)
}

func callRates(from, to busyMark) map[string]CallRate {
	if from.counts == nil || to.counts == nil || !to.at.After(from.at) {
		return nil
	}
	secs := to.at.Sub(from.at).Seconds()
	out := map[string]CallRate{}
	for call, n1 := range to.counts {
		if n := n1 - from.counts[call]; n > 0 {
			cpu := to.calls[call] - from.calls[call]
			out[call] = CallRate{PerSecond: n / secs, CPUEach: time.Duration(cpu / n * 1e9)}
		}
	}
	return out
}

func (d *Daemon) mark() busyMark {
	s, err := processSchedStat(d.PID())
	return busyMark{sched: s, at: time.Now(), ok: err == nil}
}

// busy is the daemon's CPU use between BusyStart and BusyEnd (1 is one
// core), −1 when either mark is missing.
func (d *Daemon) busy() float64 {
	if !d.busyFrom.ok || !d.busyTo.ok || !d.busyTo.at.After(d.busyFrom.at) {
		return -1
	}
	return float64(d.busyTo.sched.Run-d.busyFrom.sched.Run) / float64(d.busyTo.at.Sub(d.busyFrom.at))
}

// busySched is the daemon's scheduler statistics between BusyStart and
// BusyEnd, and the wall time between them; ok is false when either mark
// is missing.
func (d *Daemon) busySched() (s SchedStat, wall time.Duration, ok bool) {
	if !d.busyFrom.ok || !d.busyTo.ok || !d.busyTo.at.After(d.busyFrom.at) {
		return SchedStat{}, 0, false
	}
	return d.busyTo.sched.Sub(d.busyFrom.sched), d.busyTo.at.Sub(d.busyFrom.at), true
}
