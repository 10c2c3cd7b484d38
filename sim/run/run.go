// Package run builds a simulated machine from a scenario and one of its
// variants, runs it, and collects the results the reports print.
package run

import (
	"fmt"
	"github.com/memcgd/memcgd/config"
	"math/rand/v2"
	"path"
	"slices"
	"time"

	"github.com/memcgd/memcgd/internal/stats"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/sim/daemon"
	"github.com/memcgd/memcgd/sim/kernel"
	"github.com/memcgd/memcgd/sim/scenario"
	"github.com/memcgd/memcgd/sim/workload"
)

// Result is one variant's run.
type Result struct {
	Variant string
	// End is the simulated time the run stopped at.
	End kernel.Time
	// Workloads are in the scenario's order.
	Workloads []WorkloadResult
	// Focus is the report's cgroup.
	Focus       string
	FocusCounts kernel.SeedCounters
	FocusStat   []kernel.StatLine
	// PeakDirty is the focus cgroup's largest dirty+writeback sample, and
	// P99Dirty the 99th percentile, in pages.
	PeakDirty, P99Dirty int64
	// WarmupPeakDirty is the largest sample before report.warmup; P99Dirty
	// leaves those samples out.
	WarmupPeakDirty int64
	Vmstat          []kernel.VmstatLine
	// FullFlushes are reclaim's "write everything" requests, MemcgFirst
	// those seed 000 turned into the reclaiming cgroup's own.
	FullFlushes, MemcgFirst int64
	Samples                 []Sample
	// DirtyBytes is the focus cgroup's dirty_bytes knob, 0 when unset.
	DirtyBytes uint64
	// Daemon is the memcgd variant's activity, nil otherwise.
	Daemon *DaemonStats
	// CPUGroups are the scenario's cpu groups' cpu.stat, in its order.
	CPUGroups []CPUGroupStat
	// Events and PageOps measure the model's work; Wall is not part of
	// any output that must be reproducible.
	Events, PageOps int64
	Wall            time.Duration
}

// WorkloadResult is one workload's outcome, summed over its tasks.
type WorkloadResult struct {
	Name, Kind, Cgroup string
	Start, Finish      kernel.Time
	Pages              int64 // written or read
	CPU, Stall         kernel.Time
	Paused, IOWait     kernel.Time
	Pauses             int64
	Counts             kernel.SeedCounters // of its cgroup (subtree)
	// Stopped is its tasks' stopped time by cause (kernel.Task.Stopped).
	Stopped [kernel.NrStopCauses]kernel.Time
	// Latencies are a sleeper's wake-up lateness or a WAL's commit
	// latencies.
	Latencies workload.Latencies
}

// CPUGroupStat is one cpu group's cpu.stat at the end of a run.
type CPUGroupStat struct {
	Path string
	kernel.CPUStat
}

// Throughput is the workload's pages per second of its run, in bytes/s.
func (w WorkloadResult) Throughput() float64 {
	d := (w.Finish - w.Start).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(w.Pages*kernel.PageSize) / d
}

// DaemonStats is what the simulated memcgd did.
type DaemonStats struct {
	Steps, WriteOuts, Flushes, Errors int64
	Reclaimed                         int64
	// Frozen is the time the managed cgroups were frozen.
	Frozen time.Duration
	// Freezes are freezes and refreezes, by a decision or the
	// throttle's own RunFor deadline (DriverFreezes of them; DriverThaws
	// its HoldFor thaws); Wakeups the watcher's reports.
	Freezes, DriverFreezes, DriverThaws, Wakeups int64
	// Paces counts pacing episodes of the dirtying tasks; PaceSets the
	// pace writes within them.
	Paces, PaceSets int64
}

// Sample is one point of the time series, of the focus cgroup.
type Sample struct {
	T kernel.Time
	kernel.Gauges
}

// Progress is told the simulated time as a run advances.
type Progress func(now, until kernel.Time)

// Variant runs one variant of sc.
func Variant(sc *scenario.Scenario, v scenario.Variant, progress Progress) (*Result, error) {
	wall := time.Now()
	cfg := kernel.Config{
		CgroupVersion: sc.Machine.Cgroup, HZ: sc.Machine.HZ,
		MemoryPages: int64(sc.Machine.Memory / kernel.PageSize), ReservedPages: int64(sc.Machine.Reserved / kernel.PageSize),
		MinFreeKbytes: sc.Machine.MinFreeKbytes, WatermarkScaleFactor: sc.Machine.WatermarkScaleFactor,
		VMDirty: memcg.Knobs{DirtyRatio: sc.Machine.DirtyRatio, DirtyBackgroundRatio: sc.Machine.DirtyBackgroundRatio,
			DirtyBytes: sc.Machine.DirtyBytes, DirtyBackgroundBytes: sc.Machine.DirtyBackgroundBytes},
		DirtyExpireInterval:    kernel.Time(sc.Machine.DirtyExpire),
		DirtyWritebackInterval: kernel.Time(sc.Machine.DirtyWritebackInterval),
		WriteCostPerPage:       kernel.Time(sc.Machine.WritePage),
		ReadCostPerPage:        kernel.Time(sc.Machine.ReadPage),
		AnonCostPerPage:        kernel.Time(sc.Machine.AnonPage),
		ScanCostPerPage:        kernel.Time(sc.Machine.ScanPage),
		JournalCommitPages:     int64(sc.Machine.JournalCommit / kernel.PageSize),
	}
	diskIdx := map[string]int32{}
	for i, d := range sc.Disks {
		diskIdx[d.Name] = int32(i)
		cfg.Disks = append(cfg.Disks, kernel.DiskConfig{Name: d.Name, WriteBandwidth: int64(d.WriteBandwidth),
			ReadBandwidth: int64(d.ReadBandwidth), Latency: kernel.Time(d.Latency), NrRequests: d.NrRequests,
			MaxRequestPages: int64(d.MaxRequest / kernel.PageSize)})
	}
	var opts kernel.Options
	for _, kv := range v.Kernel {
		switch kv {
		case scenario.KernelSeed000:
			opts.Seed000 = &kernel.Seed000{MinDirtyPages: kernel.MinWbDirtyPages}
		case scenario.KernelSeed001:
			opts.Seed001 = &kernel.Seed001{}
		case scenario.KernelSeed004:
			opts.Seed004 = &kernel.Seed004{}
		case scenario.KernelThrottle2633:
			opts.Throttle2633 = &kernel.Throttle2633{}
		}
	}
	k, err := kernel.New(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("variant %s: %w", v.Name, err)
	}
	rng := rand.New(rand.NewPCG(sc.Seed, 0x6d656d636764))
	// Cgroups: knobs are the defaults, then the variant's, then the
	// cgroup's own.
	ids := map[string]int32{"/": 0}
	children := map[string][]int32{}
	limited := map[int32]bool{}
	toBytes := func(b uint64) int64 {
		if b == memcg.NoLimit {
			return -1
		}
		return int64(b)
	}
	knobsFor := func(own map[string]string) (memcg.Knobs, error) {
		kn := memcg.DefaultKnobs()
		if err := kn.Apply(v.Knobs); err != nil {
			return kn, err
		}
		return kn, kn.Apply(own)
	}
	for _, c := range sc.Cgroups {
		parent := ids[path.Dir(c.Path)]
		m := k.NewMemcg(parent, c.Path, toBytes(c.Limit), toBytes(c.High))
		ids[c.Path] = m
		kn, err := knobsFor(c.Knobs)
		if err != nil {
			return nil, fmt.Errorf("cgroup %s: %w", c.Path, err)
		}
		k.SetKnobs(m, kn)
		limited[m] = c.Limit != memcg.NoLimit || c.High != memcg.NoLimit || limited[parent]
		for i := 0; i < c.Count; i++ {
			ch := k.NewMemcg(m, fmt.Sprintf("%s/%d", c.Path, i), -1, -1)
			k.SetKnobs(ch, kn)
			children[c.Path] = append(children[c.Path], ch)
			limited[ch] = limited[m]
		}
	}
	// CPU groups, with the variant's cpu.max.
	cpuIDs := map[string]int32{}
	for _, g := range sc.CPUGroups {
		id := k.NewCPUGroup(cpuIDs[path.Dir(g.Path)], g.Path) // 0, the root, when the parent is not listed
		cpuIDs[g.Path] = id
		mx := g.Max
		if o, ok := v.CPUMax[g.Path]; ok {
			mx = o
		}
		quota := kernel.RuntimeInf
		if mx.Quota >= 0 {
			quota = kernel.Time(mx.Quota) * kernel.Microsecond
		}
		if err := k.SetCPUMax(id, quota, kernel.Time(mx.Period)*kernel.Microsecond, 0); err != nil {
			return nil, fmt.Errorf("variant %s: %w", v.Name, err)
		}
	}
	// Workloads.
	type wtask struct {
		tasks []*kernel.Task
		cg    int32
		lat   func() workload.Latencies
	}
	wts := make([]wtask, len(sc.Workloads))
	for i, wl := range sc.Workloads {
		m := ids[wl.Cgroup]
		wts[i].cg = m
		di := diskIdx[wl.Disk]
		pages := int64((wl.Size + kernel.PageSize - 1) / kernel.PageSize)
		block := max(int64(wl.Block/kernel.PageSize), 1)
		start := kernel.Time(wl.Start)
		switch wl.Kind {
		case scenario.KindWriter:
			acc := wl.Accesses
			if acc == 0 {
				acc = 1
				if wl.Block < kernel.PageSize {
					acc = int(kernel.PageSize / wl.Block)
				}
			}
			w := &workload.Writer{Ino: k.NewInode(di), Pages: pages, Block: block, Accesses: acc,
				Rate: int64(wl.Rate / kernel.PageSize)}
			wts[i].tasks = append(wts[i].tasks, k.NewTask(wl.Name, m, w, start))
		case scenario.KindReader:
			w := &workload.Reader{Ino: k.NewInode(di), Pages: pages, Window: block}
			wts[i].tasks = append(wts[i].tasks, k.NewTask(wl.Name, m, w, start))
		case scenario.KindAnon:
			w := &workload.Anon{Pages: pages, Rate: int64(wl.Rate / kernel.PageSize), Hold: kernel.Time(wl.Hold)}
			wts[i].tasks = append(wts[i].tasks, k.NewTask(wl.Name, m, w, start))
		case scenario.KindBuild:
			w := &workload.Build{Jobs: wl.Jobs, Rand: rand.New(rand.NewPCG(rng.Uint64(), uint64(i))),
				Compile: kernel.Time(wl.Compile), NewFile: func() int32 { return k.NewInode(di) }}
			wts[i].tasks = append(wts[i].tasks, k.NewTask(wl.Name, m, w, start))
		case scenario.KindDirtier:
			targets := children[wl.Cgroup]
			if len(targets) == 0 {
				targets = []int32{m}
			}
			for _, c := range targets {
				w := &workload.Dirtier{Ino: k.NewInode(di), Pages: pages}
				wts[i].tasks = append(wts[i].tasks, k.NewTask(wl.Name, c, w, start))
			}
		case scenario.KindSleeper:
			w := &workload.Sleeper{Interval: kernel.Time(wl.Interval), Until: start + kernel.Time(wl.Duration)}
			wts[i].tasks = append(wts[i].tasks, k.NewTask(wl.Name, m, w, start))
			wts[i].lat = func() workload.Latencies { return w.Late }
		case scenario.KindWAL:
			w := &workload.WAL{Ino: k.NewInode(di), Block: block, Until: start + kernel.Time(wl.Duration)}
			wts[i].tasks = append(wts[i].tasks, k.NewTask(wl.Name, m, w, start))
			wts[i].lat = func() workload.Latencies { return w.Commits }
		}
		if wl.CPUGroup != "" {
			for _, t := range wts[i].tasks {
				k.MoveTask(t, cpuIDs[wl.CPUGroup])
			}
		}
	}
	// The daemon manages the limited cgroups (limited_only: true).
	var dmn *daemon.Daemon
	if v.Memcgd != nil {
		cfg, err := agentConfig(sc, v, knobsFor)
		if err != nil {
			return nil, err
		}
		dmn = &daemon.Daemon{H: daemon.NewHost(k), Config: cfg, ActiveInterval: v.Memcgd.Interval, Latency: v.Memcgd.Latency,
			Tracker: v.Memcgd.Tracker, Pace: v.Memcgd.Pace}
		if err := dmn.Start(k); err != nil {
			return nil, err
		}
	}
	focus := ids[sc.Report.Focus]
	res := &Result{Variant: v.Name, Focus: sc.Report.Focus}
	sample := kernel.Time(sc.Sample)
	k.Every(0, sample, func(k *kernel.Kernel) {
		res.Samples = append(res.Samples, Sample{T: k.Now(), Gauges: k.Gauge(focus)})
	})
	until := kernel.Time(sc.Until)
	if progress != nil {
		k.Every(0, max(until/200, kernel.Millisecond), func(k *kernel.Kernel) { progress(k.Now(), until) })
	}
	res.End = k.Run(until)
	if dmn != nil {
		if err := dmn.Stop(); err != nil {
			return nil, fmt.Errorf("variant %s: %w", v.Name, err)
		}
	}
	for i, wl := range sc.Workloads {
		wr := WorkloadResult{Name: wl.Name, Kind: wl.Kind, Cgroup: wl.Cgroup, Start: kernel.Time(wl.Start), Counts: k.Counters(wts[i].cg)}
		for _, t := range wts[i].tasks {
			wr.Pages += t.Written + t.Read
			wr.CPU += t.CPU
			wr.Stall += t.Stall
			wr.Paused += t.Paused
			wr.IOWait += t.IOWait
			wr.Pauses += t.Pauses
			for c := range wr.Stopped {
				wr.Stopped[c] += t.Stopped[c]
			}
			f := t.End
			if !t.Done() {
				f = res.End
			}
			wr.Finish = max(wr.Finish, f)
		}
		if wts[i].lat != nil {
			wr.Latencies = wts[i].lat()
		}
		res.Workloads = append(res.Workloads, wr)
	}
	for _, g := range sc.CPUGroups {
		res.CPUGroups = append(res.CPUGroups, CPUGroupStat{Path: g.Path, CPUStat: k.CPUStat(cpuIDs[g.Path])})
	}
	res.FocusCounts = k.Counters(focus)
	res.FocusStat = k.MemoryStat(focus)
	res.Vmstat = k.Vmstat()
	res.FullFlushes, res.MemcgFirst = k.WBStartAll()
	var after []int64
	warmup := kernel.Time(sc.Report.Warmup)
	for _, s := range res.Samples {
		d := s.Dirty + s.Writeback
		res.PeakDirty = max(res.PeakDirty, d)
		if s.T < warmup {
			res.WarmupPeakDirty = max(res.WarmupPeakDirty, d)
		} else {
			after = append(after, d)
		}
	}
	_, res.P99Dirty = peakAndP99(after)
	if dmn != nil {
		h, st := dmn.H, dmn.Stats()
		res.Daemon = &DaemonStats{Steps: st.Steps, WriteOuts: h.WriteOuts, Flushes: h.Flushes, Reclaimed: h.Reclaimed,
			Frozen: h.Frozen, Freezes: h.Freezes, DriverFreezes: st.DriverFreezes, DriverThaws: st.DriverThaws, Paces: h.Paces, PaceSets: h.PaceSets,
			Wakeups: dmn.Wakeups, Errors: dmn.Errors()}
	}
	res.DirtyBytes = k.Knobs(focus).DirtyBytes
	res.Events, res.PageOps = k.Events, k.PageOps()
	res.Wall = time.Since(wall)
	return res, nil
}

// agentConfig is the daemon's policy for variant v: the variant's knobs
// for every cgroup, each scenario cgroup's own on it and on its count
// children, as knobsFor gives the simulated kernel; limited_only, as the
// default policy.
func agentConfig(sc *scenario.Scenario, v scenario.Variant, knobsFor func(map[string]string) (memcg.Knobs, error)) (*config.Config, error) {
	def, err := knobsFor(nil)
	if err != nil {
		return nil, fmt.Errorf("variant %s: %w", v.Name, err)
	}
	cfg := &config.Config{Under: "/", LimitedOnly: true, Defaults: def}
	for _, c := range sc.Cgroups {
		if len(c.Knobs) == 0 {
			continue
		}
		p, err := memcg.ParsePatch(c.Knobs)
		if err != nil {
			return nil, fmt.Errorf("cgroup %s: %w", c.Path, err)
		}
		cfg.Rules = append(cfg.Rules, config.Rule{Match: c.Path, Set: p})
		if c.Count > 0 {
			cfg.Rules = append(cfg.Rules, config.Rule{Match: c.Path + "/*", Set: p})
		}
	}
	return cfg, nil
}

func peakAndP99(xs []int64) (peak, p99 int64) {
	s := slices.Sorted(slices.Values(xs))
	return stats.Percentile(s, 100), stats.Percentile(s, 99)
}
