package lab

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// An experiment compares arms on the same workload: stock (no memcgd),
// memcgd as it runs by default (with its eBPF dirty tracker where it
// loads), and memcgd on its fallback path (the tracker disabled by a
// flag). Order rotates which arm runs first between repetitions, so that
// a drift of the machine (another tenant's I/O, a warming disk cache)
// does not always favour the same arm, and each repetition's ratios are
// taken between arms run back to back.

// TrackerOffFlag is the `memcgd run` flag that disables the eBPF dirty
// tracker, so that the daemon runs its fallback (an adaptive polling
// interval). The fallback arm passes it; it is the one place the flag's
// name is spelled.
const TrackerOffFlag = "--dirty-tracker=off"

// Arm is one way of running a workload.
type Arm struct {
	// Name is the arm's name on the command line (-arms) and in tables.
	Name string
	// Daemon says whether memcgd runs in this arm.
	Daemon bool
	// Args are extra `memcgd run` flags of this arm, after -daemon-args.
	Args []string
	// SelfPaced: no memcgd, and the writer paces itself, keeping at most
	// the dirty limit dirty or under writeback and sending every write to
	// the device at once: the ceiling of any throttle that holds that
	// limit, on this device (experiments that support it say so).
	SelfPaced bool
}

// The arms every experiment knows.
var (
	// Stock runs the workload without memcgd.
	Stock = Arm{Name: "stock"}
	// Memcgd runs memcgd with its defaults: the tracker where it loads.
	Memcgd = Arm{Name: "memcgd", Daemon: true}
	// Fallback runs memcgd with the tracker disabled (TrackerOffFlag).
	Fallback = Arm{Name: "fallback", Daemon: true, Args: []string{TrackerOffFlag}}
	// SelfPaced runs a writer that paces itself to the dirty limit,
	// without memcgd; only experiments that size the writer's budget
	// accept it (Flags.ExtraArms).
	SelfPaced = Arm{Name: "selfpaced", SelfPaced: true}
)

// KnownArms are the arms -arms accepts in every experiment.
var KnownArms = []Arm{Stock, Memcgd, Fallback}

// DefaultArms is the default of -arms.
const DefaultArms = "stock,memcgd,fallback"

// ParseArms parses a comma-separated list of arm names, of KnownArms and
// extra. The first arm is the baseline every other is compared with; it
// must be stock.
func ParseArms(s string, extra ...Arm) ([]Arm, error) {
	known := append(slices.Clone(KnownArms), extra...)
	var arms []Arm
	var names []string
	for _, a := range known {
		names = append(names, a.Name)
	}
	for _, n := range strings.Split(s, ",") {
		i := slices.Index(names, n)
		if i < 0 {
			return nil, fmt.Errorf("-arms: invalid arm %q: allowed %s", n, strings.Join(names, ", "))
		}
		if slices.ContainsFunc(arms, func(a Arm) bool { return a.Name == n }) {
			return nil, fmt.Errorf("-arms: arm %q given twice", n)
		}
		arms = append(arms, known[i])
	}
	if len(arms) < 2 || arms[0].Name != Stock.Name {
		return nil, fmt.Errorf("-arms: invalid value %q: want stock first (the baseline), then at least one arm with memcgd", s)
	}
	return arms, nil
}

// Order is the order in which repetition run (from 1) runs n arms, as
// indices: a rotation that starts at arm (run−1) mod n. With two arms,
// odd runs start without memcgd and even runs with it.
func Order(run, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = (run - 1 + i) % n
	}
	return out
}

// OrderText names the arms in the order repetition run runs them.
func OrderText(run int, arms []Arm) string {
	var names []string
	for _, i := range Order(run, len(arms)) {
		names = append(names, arms[i].Name)
	}
	return "order: " + strings.Join(names, ", ")
}

// StartArm starts memcgd with config for an arm with it, and waits until
// it has observed c; for the stock arm it does nothing and returns nil.
func (b *Bench) StartArm(ctx context.Context, arm Arm, config string, c *Cgroup) (*Daemon, error) {
	if !arm.Daemon {
		return nil, nil
	}
	d, err := b.StartDaemon(ctx, DaemonOptions{Bin: b.Memcgd, Config: config,
		Args: append(strings.Fields(b.DaemonArgs), arm.Args...), Nice: b.Nice})
	if err != nil {
		return nil, err
	}
	if err := d.Await(ctx, c.Path); err != nil {
		return nil, err
	}
	d.startup = time.Since(d.Started())
	return d, nil
}

// DaemonResult is what a daemon reported and used in one arm.
type DaemonResult struct {
	// Fields are its `memcgd stat` fields for the arm's cgroup; nil
	// without a daemon.
	Fields map[string]uint64
	// Usage is the daemon's own CPU time (its rusage) and lifetime.
	Usage Usage
	// Startup is how long it took from its start until it had observed
	// the arm's cgroup.
	Startup time.Duration
	// Busy is the daemon's CPU use during the workload, from BusyStart
	// to BusyEnd: CPU time over wall time (1 is one core); −1 when it was
	// not measured.
	Busy float64
	// Sched is the daemon's threads' scheduler statistics over the same
	// interval, summed (Slices: how often its threads were put on a CPU,
	// about one per wake-up), and BusyWall the interval; both zero when
	// Busy was not measured.
	Sched    SchedStat
	BusyWall time.Duration
	// KernelWork is the part of Busy spent in the host calls that do the
	// kernel's work (KernelWorkCalls), by the daemon's own count
	// (memcgd_host_call_cpu_seconds_total); −1 when not measured.
	KernelWork float64
	// Steps is how many steps (looks at a cgroup: observe calls) a
	// second it made in that interval, over all its cgroups
	// (memcgd_host_calls_total); −1 when not measured.
	Steps float64
	// Late is how late its loop woke for its timers in that interval
	// (memcgd_timer_lateness_seconds); N −1 when not measured.
	Late Lateness
	// GCs is how many garbage collections a second its Go runtime ran
	// in that interval, and AllocPerStep the bytes it allocated per step
	// (go_gc_duration_seconds_count, go_memstats_alloc_bytes_total);
	// −1 when not measured.
	GCs, AllocPerStep float64
	// Calls is each kind of host call it made in that interval, by the
	// call's name; nil when not measured.
	Calls map[string]CallRate
}

// GCRate and AllocatedPerStep are GCs and AllocPerStep, NaN (printed
// n/a) when not measured.
func (r DaemonResult) GCRate() float64           { return measured(r.GCs) }
func (r DaemonResult) AllocatedPerStep() float64 { return measured(r.AllocPerStep) }

// measured is v, NaN when v is −1: not measured.
func measured(v float64) float64 {
	if v < 0 {
		return math.NaN()
	}
	return v
}

// TimerWakeUps, LateP50 and LateP99 are Late's count and percentiles in
// milliseconds, NaN (printed n/a) when not measured.
func (r DaemonResult) TimerWakeUps() float64 { return r.late(func(l Lateness) float64 { return l.N }) }
func (r DaemonResult) LateP50() float64 {
	return r.late(func(l Lateness) float64 { return float64(l.P50) / 1e6 })
}
func (r DaemonResult) LateP99() float64 {
	return r.late(func(l Lateness) float64 { return float64(l.P99) / 1e6 })
}

func (r DaemonResult) late(f func(Lateness) float64) float64 {
	if r.Late.N < 0 {
		return math.NaN()
	}
	return f(r.Late)
}

// StepRate is Steps, NaN (printed n/a) when not measured.
func (r DaemonResult) StepRate() float64 { return measured(r.Steps) }

// RunsPerStep is how many times its threads were put on a CPU per step
// (Sched.Slices over Steps): about one per thread wake-up, so the
// goroutine hand-offs a step costs; NaN (printed n/a) when not measured.
func (r DaemonResult) RunsPerStep() float64 {
	if r.Steps <= 0 || r.BusyWall <= 0 {
		return math.NaN()
	}
	return float64(r.Sched.Slices) / r.BusyWall.Seconds() / r.Steps
}

// CallText is Calls' entry for call as "N/s, M µs" (a second, and CPU
// each), "0/s" when it made none, "n/a" when not measured.
func (r DaemonResult) CallText(call string) string {
	if r.Calls == nil {
		return "n/a"
	}
	c, ok := r.Calls[call]
	if !ok {
		return "0/s"
	}
	return fmt.Sprintf("%.0f/s, %.0f µs", c.PerSecond, float64(c.CPUEach)/1e3)
}

// KernelWorkPercent is KernelWork in percent of one core, NaN (printed
// n/a) when not measured.
func (r DaemonResult) KernelWorkPercent() float64 { return measured(r.KernelWork) * 100 }

// Tracker says which dirty-tracking path the daemon reported for the
// cgroup: "tracker", "poll" (the fallback), or "n/a" when its `memcgd
// stat` has no dirty_tracker field (a daemon from before issue 7) or no
// daemon ran.
func (r DaemonResult) Tracker() string {
	v, ok := r.Fields["dirty_tracker"]
	switch {
	case !ok:
		return "n/a"
	case v == 1:
		return "tracker"
	default:
		return "poll"
	}
}

// EndArm reads d's counters for c, stops d (SIGTERM, exit status 0) and
// checks that it left c and the lab's Root as it found them. With a nil d
// it returns the zero DaemonResult. The daemon's CPU use during the
// workload (DaemonResult.Busy) is measured from d.BusyStart to d.BusyEnd.
func (b *Bench) EndArm(ctx context.Context, d *Daemon, c *Cgroup) (DaemonResult, error) {
	if d == nil {
		return DaemonResult{Busy: -1, KernelWork: -1, Steps: -1, Late: Lateness{N: -1}, GCs: -1, AllocPerStep: -1}, nil
	}
	busy, work, steps, late := d.busy(), d.kernelWork(), d.stepRate(), lateness(d.busyFrom.late, d.busyTo.late)
	gcs, alloc := d.runtimeRates()
	calls := d.callRates()
	sched, wall, _ := d.busySched()
	st, err := d.Stat(ctx, c.Path)
	if err != nil {
		return DaemonResult{}, err
	}
	if err := d.Stop(); err != nil {
		return DaemonResult{}, err
	}
	if err := CheckUntouched(b.Root, c); err != nil {
		return DaemonResult{}, fmt.Errorf("memcgd left a change behind: %w", err)
	}
	return DaemonResult{Fields: st, Usage: d.Usage(), Startup: d.startup, Busy: busy,
		Sched: sched, BusyWall: wall, KernelWork: work, Steps: steps, Late: late, GCs: gcs, AllocPerStep: alloc, Calls: calls}, nil
}
