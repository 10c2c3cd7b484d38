package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/hostcall"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/sched"
	"github.com/memcgd/memcgd/sim/kernel"
	"github.com/memcgd/memcgd/state"
)

// Daemon is the shipped daemon's scheduler (sched.Core), with the real
// policy, driven by the simulated kernel's clock: the Core's ops are
// carried out on the Host as they come, each taking no simulated time;
// its deadlines are kernel timers; its watches are the kernel's
// thresholds (the dirtied one only with Tracker, as the eBPF tracker
// arms it), whose reports reach the Core Latency after the crossing. The
// Core anticipates that latency (sched.Config.Reaction). With no
// goroutines, a run is deterministic, under the race detector too.
//
// What is not modelled: the time the daemon's own code and host calls
// take (zero on the simulated clock), and its CPU.
type Daemon struct {
	H      *Host
	Config *config.Config
	// ActiveInterval is the daemon's --active-interval; Latency the event
	// latency from a threshold crossing to the report reaching the Core.
	ActiveInterval, Latency time.Duration
	// Tracker says the dirtied-bytes tracker is in force; Pace that the
	// throttle paces the dirtying tasks by CPU bandwidth, with the
	// freezer as its backstop (without it, the freezer throttles).
	Tracker, Pace bool
	// Log receives the daemon's logs; nil discards them.
	Log *slog.Logger

	// Wakeups counts the watcher's reports delivered.
	Wakeups int64

	k       *kernel.Kernel
	core    *sched.Core
	timer   int32           // the kernel timer of the Core's deadline
	reports map[int32]int32 // memcg id → the kernel timer of its pending report
	status  map[host.Cgroup]state.Status
	stopped bool
}

// Start builds the Core on k and runs it until its first listing has
// stepped every cgroup. It must be called on the goroutine that then runs
// k.
func (d *Daemon) Start(k *kernel.Kernel) error {
	if d.Config == nil {
		return fmt.Errorf("sim daemon: no config")
	}
	d.k = k
	d.reports = map[int32]int32{}
	d.status = map[host.Cgroup]state.Status{}
	level := slog.LevelInfo
	if d.Log != nil && d.Log.Enabled(context.Background(), slog.LevelDebug) {
		level = slog.LevelDebug
	}
	d.core = sched.New(sched.Config{
		Policy: d.Config, Tracker: d.Tracker, TrackingReason: "--dirty-tracker=off", Freezer: true, Pacer: d.Pace, Counter: true,
		ActiveInterval: d.ActiveInterval, Reaction: d.Latency,
		// The slow safety scan and the audit are beyond any run.
		ScanInterval: 1 << 62, AuditInterval: 1 << 62, Log: level,
	}, d.H.Now())
	d.timer = k.NewTimer(func(k *kernel.Kernel) {
		d.core.Tick(d.H.Now())
		d.pump()
	})
	k.SetWatchHook(d.watchFired)
	d.pump()
	return nil
}

// Stop ends every throttle episode (the daemon never leaves a cgroup
// frozen) and stops the Core; the kernel may run on.
func (d *Daemon) Stop() error {
	d.core.Stop(d.H.Now())
	for range 1000 {
		rd := d.core.Ready()
		d.take(rd)
		if rd.Stopped && len(rd.Ops) == 0 {
			d.stopped = true
			d.k.StopTimer(d.timer)
			return nil
		}
		d.carryOut(rd.Ops)
	}
	return fmt.Errorf("sim daemon: the scheduler did not stop")
}

// Stats are the Core's counts.
func (d *Daemon) Stats() sched.Stats { return d.core.Stats() }

// Errors sums the failed actions the daemon counted, over every cgroup.
func (d *Daemon) Errors() int64 {
	var n int64
	for _, s := range d.status {
		n += int64(s.Counters.Errors)
	}
	return n
}

// Status is the daemon's view of cg.
func (d *Daemon) Status(cg host.Cgroup) (state.Status, bool) {
	s, ok := d.status[cg]
	return s, ok
}

// pump carries out the Core's ops until it has none, then sets the
// kernel timer for its deadline.
func (d *Daemon) pump() {
	if d.stopped {
		return
	}
	for {
		rd := d.core.Ready()
		d.take(rd)
		if len(rd.Ops) == 0 {
			if rd.Deadline.IsZero() {
				d.k.StopTimer(d.timer)
			} else {
				d.k.ArmTimer(d.timer, max(kernel.Time(rd.Deadline.Sub(epoch)), d.k.Now()))
			}
			return
		}
		d.carryOut(rd.Ops)
	}
}

// carryOut runs ops on the Host and reports them.
func (d *Daemon) carryOut(ops []sched.Op) {
	rs := make([]sched.Result, 0, len(ops))
	for _, op := range ops {
		rs = append(rs, d.do(op))
	}
	d.core.Advance(d.H.Now(), rs...)
}

// take keeps the statuses and logs a Ready hands out.
func (d *Daemon) take(rd sched.Ready) {
	for _, cg := range rd.Removed {
		delete(d.status, cg)
	}
	for _, s := range rd.Status {
		d.status[s.Cgroup] = *s
	}
	if d.Log == nil {
		return
	}
	h := d.Log.Handler()
	for _, r := range rd.Logs {
		if h.Enabled(context.Background(), r.Level) {
			_ = h.Handle(context.Background(), r)
		}
	}
}

// do carries out one op (hostcall.Do), counting the pace changes.
func (d *Daemon) do(op sched.Op) sched.Result {
	if op.Kind == sched.SetPace {
		d.H.PaceSets++
	}
	return hostcall.Do(context.Background(), d.H, driver{d}, op)
}

// driver is the simulated daemon's part of hostcall.Driver: the kernel's
// thresholds.
type driver struct{ d *Daemon }

func (dr driver) Watch(cg host.Cgroup, w host.Wake) error { return dr.d.watch(cg, w) }

// Forget disarms cg's thresholds; a cgroup already gone has none.
func (dr driver) Forget(cg host.Cgroup) error {
	if m, err := dr.d.H.id(cg); err == nil {
		dr.d.k.Watch(m, memcg.NoLimit, memcg.NoLimit)
		dr.d.k.WatchReclaim(m, false)
	}
	return nil
}

// watch arms the kernel's thresholds for cg, the dirtied one only with
// the tracker, and its reports of limit reclaim unless w.OnlyArmed.
func (d *Daemon) watch(cg host.Cgroup, w host.Wake) error {
	m, err := d.H.id(cg)
	if err != nil {
		return err
	}
	dirtied := uint64(memcg.NoLimit)
	if d.Tracker {
		dirtied = w.DirtiedAbove
	}
	d.k.Watch(m, w.UsageAbove, dirtied)
	d.k.WatchReclaim(m, !w.OnlyArmed)
	return nil
}

// watchFired is the kernel's threshold hook: the report reaches the Core
// Latency later, once per crossing however many come meanwhile.
func (d *Daemon) watchFired(k *kernel.Kernel, m int32) {
	if d.stopped {
		return
	}
	id, ok := d.reports[m]
	if !ok {
		id = k.NewTimer(func(k *kernel.Kernel) {
			d.Wakeups++
			d.core.Report(d.H.Now(), host.Cgroup(k.MemcgName(m)))
			d.pump()
		})
		d.reports[m] = id
	}
	at := k.Now() + kernel.Time(d.Latency)
	if t, armed := k.TimerArmed(id); armed && t <= at {
		return
	}
	k.ArmTimer(id, at)
}
