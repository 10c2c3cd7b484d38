// Command pacing measures the candidates for a throttle that paces only a
// cgroup's dirtying threads with the CFS bandwidth controller, against
// the freezer memcgd uses now. It is a standalone prototype and its
// measurement, not the daemon's actuator; docs/lab/2026-12-01-pacing-study.md
// has the findings.
//
//	go run ./experiments/pacing [-measures law,burst,cost,short,sleeper,inversion,find,kill]   # this host: cgroup v1, mechanism v1
//	go run ./experiments/pacing -vm v2 [-measures ...,rules]                                   # the test VM: cgroup v2, mechanisms threaded and leaf
//
// The mechanisms (pacer.go): v1, a child cpu cgroup memcgd.pace beneath
// the thread's cpu cgroup, holding only the dirtying TIDs (tasks); on v2,
// threaded, a threaded child memcgd.pace of the tenant's leaf holding only
// the dirtying TIDs (cgroup.threads), and leaf, cpu.max on the leaf
// itself; and, for comparison, the freezer thawed for the same share of
// each period. A tenant (tenant.go) is this binary re-executed in the
// tenant's cgroups: a writer thread that write(2)s 1 MiB buffers into the
// page cache of a file on disk, and on threads of their own a 1 ms
// sleeper, a pipe feeder and an mmap writer.
//
// The measures, each printed as a table:
//
//	law        the writer's dirty rate and CPU share against quota/period
//	burst      what a paced writer's writes look like inside each period
//	cost       the latency of moving a thread in and out and of changing the quota
//	short      short reads of /dev/zero and of a pipe, paced and frozen (and dd's partial records)
//	sleeper    the 1 ms sleeper's wake-up lateness beside the writer
//	inversion  a neighbour's 4 KiB append + fdatasync latency while the writer is paced
//	find       whether per-thread /proc/PID/task/TID/io write_bytes grows at dirtying time
//	rules      (v2) what the kernel permits and refuses for a threaded pace group
//	kill       a pacer SIGKILLed after each of its steps, and the undo from its journal
//
// Runs that touch the kernel must hold the machine's heavy lock:
//
//	flock /work/heavy.lock go run ./experiments/pacing
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/memcgd/memcgd/experiments/internal/lab"
)

// options are the experiment's own flags.
type options struct {
	measures []string
	mechs    []string
	// law
	window  time.Duration
	shares  []float64
	periods []time.Duration
	// burst
	bursts    [][2]time.Duration
	burstTime time.Duration
	// short, sleeper, inversion
	share      float64
	shortRuns  int
	shortTime  time.Duration
	sleepTime  time.Duration
	invPeriods []time.Duration
	invTime    time.Duration
	fileCap    lab.Size
	invCap     lab.Size
	costN      int
	ddMiB      int
}

var allMeasures = []string{"law", "burst", "cost", "short", "sleeper", "inversion", "find", "rules", "kill"}

func main() {
	if len(os.Args) > 1 {
		// The re-executed roles (tenant.go, victim.go, kill.go).
		roles := map[string]func([]string) error{"tenant": tenantMain, "victim": victimMain, "pacer": pacerMain}
		if f, ok := roles[os.Args[1]]; ok {
			if err := f(os.Args[2:]); err != nil {
				fmt.Fprintf(os.Stderr, "pacing %s: %v\n", os.Args[1], err)
				os.Exit(1)
			}
			return
		}
	}
	f := lab.Flags{VMDefaults: map[string]string{
		"window": "1s", "shares": "0.1,0.2,0.5", "periods": "5ms,20ms,100ms", "burst-time": "2s",
		"sleep-time": "2s", "inv-time": "4s", "cost-n": "50", "file-cap": "128M", "inv-cap": "256M", "dd-mib": "64",
	}}
	f.Register(flag.CommandLine)
	var o options
	measures := flag.String("measures", "", "measures to run, comma-separated, of "+strings.Join(allMeasures, ",")+" (default: all that apply; rules needs v2)")
	mechs := flag.String("mechs", "", "pacing mechanisms, comma-separated: v1 (cgroup v1), threaded and leaf (cgroup v2); default: those of this host's layout")
	flag.DurationVar(&o.window, "window", 2*time.Second, "law: how long each quota is measured")
	shares := flag.String("shares", "0.05,0.1,0.2,0.5,0.8", "law: quota/period shares")
	periods := flag.String("periods", "5ms,10ms,20ms,100ms,200ms", "law: periods")
	bursts := flag.String("bursts", "1ms/200ms,2ms/10ms,20ms/100ms", "burst: quota/period pairs")
	flag.DurationVar(&o.burstTime, "burst-time", 3*time.Second, "burst: how long each pair runs")
	flag.Float64Var(&o.share, "share", 0.2, "short, sleeper, inversion: the paced or thawed share of each period")
	flag.IntVar(&o.shortRuns, "short-runs", 20, "short: runs per source and arm")
	flag.DurationVar(&o.shortTime, "short-time", 500*time.Millisecond, "short: length of a run")
	flag.DurationVar(&o.sleepTime, "sleep-time", 3*time.Second, "sleeper: length of an arm")
	invPeriods := flag.String("inv-periods", "5ms,20ms,100ms", "inversion: periods")
	flag.DurationVar(&o.invTime, "inv-time", 5*time.Second, "inversion: how long the neighbour runs per arm")
	o.fileCap, o.invCap = 256<<20, 1<<30
	flag.Var(&o.fileCap, "file-cap", "law, burst, short, sleeper: the writer truncates its file at this size, so it stays CPU-bound, never waiting on writeback")
	flag.Var(&o.invCap, "inv-cap", "inversion: the writer truncates its file at this size")
	flag.IntVar(&o.costN, "cost-n", 200, "cost: repetitions of each operation")
	flag.IntVar(&o.ddMiB, "dd-mib", 512, "short: MiB each dd run copies")
	flag.Parse()

	var err error
	if o.measures, err = parseList(*measures, allMeasures); err != nil {
		fail("-measures", err)
	}
	if o.mechs, err = parseList(*mechs, []string{mechV1, mechThreaded, mechLeaf}); err != nil {
		fail("-mechs", err)
	}
	if o.shares, err = parseShares(*shares); err != nil {
		fail("-shares", err)
	}
	if o.periods, err = parseDurations(*periods); err != nil {
		fail("-periods", err)
	}
	if o.invPeriods, err = parseDurations(*invPeriods); err != nil {
		fail("-inv-periods", err)
	}
	if o.bursts, err = parsePairs(*bursts); err != nil {
		fail("-bursts", err)
	}
	if o.share <= 0 || o.share >= 1 {
		fail("-share", fmt.Errorf("invalid value %v: want a share between 0 and 1", o.share))
	}
	if o.shortRuns < 1 || o.costN < 1 || o.ddMiB < 1 {
		fail("-short-runs/-cost-n/-dd-mib", fmt.Errorf("want at least 1"))
	}
	lab.Main("./experiments/pacing", f, func(ctx context.Context, b *lab.Bench) error { return run(ctx, b, o) })
}

func fail(flagName string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", flagName, err)
	os.Exit(2)
}

func run(ctx context.Context, b *lab.Bench, o options) error {
	e, err := newEnv(b, o)
	if err != nil {
		return err
	}
	measures := o.measures
	if len(measures) == 0 {
		for _, m := range allMeasures {
			if m != "rules" || e.v2 {
				measures = append(measures, m)
			}
		}
	}
	fmt.Printf("Mechanisms: %s. Load average at start: %s.\n\n", strings.Join(e.mechs, ", "), load1())
	for _, m := range measures {
		fns := map[string]func(context.Context) error{
			"law": e.law, "burst": e.burst, "cost": e.cost, "short": e.short, "sleeper": e.sleeper,
			"inversion": e.inversion, "find": e.find, "rules": e.rules, "kill": e.kill,
		}
		if err := fns[m](ctx); err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

func parseList(s string, allowed []string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var out []string
	for _, x := range strings.Split(s, ",") {
		ok := false
		for _, a := range allowed {
			ok = ok || a == x
		}
		if !ok {
			return nil, fmt.Errorf("invalid value %q: allowed %s", x, strings.Join(allowed, ", "))
		}
		out = append(out, x)
	}
	return out, nil
}

func parseShares(s string) ([]float64, error) {
	var out []float64
	for _, x := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(x, 64)
		if err != nil || v <= 0 || v > 1 {
			return nil, fmt.Errorf("invalid share %q: want a number in (0, 1]", x)
		}
		out = append(out, v)
	}
	return out, nil
}

// The kernel's bounds on a CFS period and quota (kernel/sched/core.c
// max_cfs_quota_period, min_cfs_quota_period).
const (
	minCFSPeriod = time.Millisecond
	maxCFSPeriod = time.Second
)

func parseDurations(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, x := range strings.Split(s, ",") {
		d, err := time.ParseDuration(x)
		if err != nil || d < minCFSPeriod || d > maxCFSPeriod {
			return nil, fmt.Errorf("invalid period %q: want a duration from 1ms to 1s", x)
		}
		out = append(out, d)
	}
	return out, nil
}

func parsePairs(s string) ([][2]time.Duration, error) {
	var out [][2]time.Duration
	for _, x := range strings.Split(s, ",") {
		q, p, ok := strings.Cut(x, "/")
		if !ok {
			return nil, fmt.Errorf("invalid pair %q: want QUOTA/PERIOD, as 1ms/200ms", x)
		}
		qd, err1 := time.ParseDuration(q)
		pd, err2 := time.ParseDuration(p)
		if err1 != nil || err2 != nil || qd < minCFSPeriod || pd < minCFSPeriod || pd > maxCFSPeriod {
			return nil, fmt.Errorf("invalid pair %q: want a quota of at least 1ms and a period from 1ms to 1s", x)
		}
		out = append(out, [2]time.Duration{qd, pd})
	}
	return out, nil
}
