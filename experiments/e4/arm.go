package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/memcgd/memcgd/experiments/internal/lab"
	"github.com/memcgd/memcgd/internal/stall"
)

// The names of the sampled tasks.
const (
	taskSync   = "log"
	taskBg     = "buffered writer"
	taskJournl = "jbd2"
)

// armEnv is what every arm shares: the filesystem's journal, if any.
type armEnv struct {
	journal    lab.Journal
	hasJournal bool
	// settle is the slowest write+fdatasync of a settled disk
	// (lab.Settle): each arm begins once the disk answers within it.
	settle time.Duration
	// idle is how long the disk is left idle before each arm's probe.
	idle time.Duration
}

// victims are the three victims' reports and what was read around them.
type victims struct {
	sleep, sync, bg lab.VictimResult
	// syncPSI and bgPSI are the rise of the PSI totals of the log's and
	// the buffered writer's cgroups.
	syncPSI, bgPSI lab.Pressure
	// stacks are the sampled tasks' kernel stacks, by task name.
	stacks map[string]lab.Stacks
	// disk is the device over the victims' window.
	disk lab.DiskActivity
	// journal is the journal's statistics at the start and the end, and
	// its thread's schedstat over the window (hasJournal).
	journal0, journal1 lab.JournalStats
	jbd2               lab.SchedStat
	// stalls are the machine's over the victims' window
	// (stall.Probe): a stall delays every victim, whoever caused it.
	stalls stall.Stalls
}

// result is what one arm measured.
type result struct {
	victims
	w      lab.WriterResult
	daemon lab.DaemonResult
	// load is the load average at the arm's start and end.
	load0, load1 string
	// wall is the arm's time, its setup and cleanup included.
	wall time.Duration
	// settleWait is how long the disk took to settle before the arm,
	// settleSlowest the slowest probe of its last round, settled whether
	// that was within the bound.
	settleWait, settleSlowest time.Duration
	settled                   bool
}

// alone runs the victims for e.solo without the noisy writer nor memcgd.
func (e experiment) alone(ctx context.Context, b *lab.Bench, run int) (victims, error) {
	if err := lab.DropCaches(); err != nil {
		return victims{}, err
	}
	tag := fmt.Sprintf("alone-%d", run)
	cgs, err := e.cgroups(b, tag)
	if err != nil {
		return victims{}, err
	}
	vs, err := e.startVictims(ctx, b, armEnv{}, tag, cgs)
	if err != nil {
		return victims{}, err
	}
	select {
	case <-ctx.Done():
	case <-time.After(e.solo):
	}
	v, err := vs.stop()
	if err != nil {
		return v, err
	}
	return v, e.cleanup(b, tag, cgs)
}

// cgroups are an arm's: the noisy writer's (limited, so that memcgd
// manages it; the sleeper runs there too), the log's and the buffered
// writer's (unlimited, so that memcgd leaves them alone).
type cgroups struct{ writer, sync, bg *lab.Cgroup }

func (e experiment) cgroups(b *lab.Bench, tag string) (cgroups, error) {
	var c cgroups
	var err error
	if c.writer, err = b.Cgroup(nil, "w-"+tag, lab.CgroupOptions{Limit: uint64(e.limit), Mirror: true}); err != nil {
		return c, err
	}
	if c.sync, err = b.Cgroup(nil, "s-"+tag, lab.CgroupOptions{Mirror: true}); err != nil {
		return c, err
	}
	c.bg, err = b.Cgroup(nil, "b-"+tag, lab.CgroupOptions{Mirror: true})
	return c, err
}

// cleanup removes an arm's cgroups and files.
func (e experiment) cleanup(b *lab.Bench, tag string, c cgroups) error {
	var errs []error
	for _, cg := range []*lab.Cgroup{c.bg, c.sync, c.writer} {
		errs = append(errs, b.Remove(cg))
	}
	for _, f := range []string{"e4-" + tag, "e4-" + tag + "-log", "e4-" + tag + "-bg"} {
		if err := os.Remove(b.File(f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// running are the victims started, and the samplers and marks around
// them.
type running struct {
	sleep, sync, bg *lab.RunningVictim
	sampler         *lab.StackSampler
	cgs             cgroups
	env             armEnv
	lab             *lab.Lab
	psiSync, psiBg  lab.Pressure
	disk            lab.DiskMark
	probe           *stall.Probe
	journal         lab.JournalStats
	jbd2            lab.SchedStat
}

// startVictims starts the three victims in cgs and the marks and samplers
// around them.
func (e experiment) startVictims(ctx context.Context, b *lab.Bench, env armEnv, tag string, cgs cgroups) (*running, error) {
	r := &running{cgs: cgs, env: env, lab: b.Lab}
	var err error
	if r.sleep, err = (lab.Victim{Bin: b.Victim, Mode: lab.VictimSleep, Interval: time.Millisecond}).Start(ctx, b.Lab, cgs.writer); err != nil {
		return nil, err
	}
	if r.sync, err = (lab.Victim{Bin: b.Victim, Mode: lab.VictimSync, File: b.File("e4-" + tag + "-log"), Block: uint64(e.block)}).Start(ctx, b.Lab, cgs.sync); err != nil {
		return nil, err
	}
	if r.bg, err = (lab.Victim{Bin: b.Victim, Mode: lab.VictimWrite, File: b.File("e4-" + tag + "-bg"),
		Chunk: uint64(e.bgChunk), Rate: uint64(e.bgRate)}).Start(ctx, b.Lab, cgs.bg); err != nil {
		return nil, err
	}
	tasks := []lab.Task{r.sync.Task(taskSync), r.bg.Task(taskBg)}
	if env.hasJournal {
		tasks = append(tasks, lab.Task{Name: taskJournl, Pid: env.journal.Pid, Tid: env.journal.Pid})
		if r.journal, err = env.journal.Stats(); err != nil {
			return nil, err
		}
		if r.jbd2, err = lab.ReadSchedStat(fmt.Sprintf("/proc/%d/schedstat", env.journal.Pid)); err != nil {
			return nil, err
		}
	}
	if e.stackEvery > 0 {
		if r.sampler, err = b.SampleStacks(e.stackEvery, tasks...); err != nil {
			return nil, err
		}
	}
	if r.psiSync, err = cgs.sync.Pressure(); err != nil {
		return nil, err
	}
	if r.psiBg, err = cgs.bg.Pressure(); err != nil {
		return nil, err
	}
	r.disk = b.Disk()
	if r.probe, err = stall.Start(); err != nil {
		return nil, err
	}
	return r, nil
}

// stop stops the victims and the samplers and returns what they measured.
func (r *running) stop() (victims, error) {
	var v victims
	disk := r.disk
	var errs []error
	var err error
	v.stalls, err = r.probe.Stop()
	errs = append(errs, err)
	v.sleep, err = r.sleep.Stop()
	errs = append(errs, err)
	v.sync, err = r.sync.Stop()
	errs = append(errs, err)
	v.bg, err = r.bg.Stop()
	errs = append(errs, err)
	v.disk = r.lab.Disk().Sub(disk)
	if r.sampler != nil {
		stacks, err := r.sampler.Stop()
		errs = append(errs, err)
		v.stacks = map[string]lab.Stacks{}
		for _, s := range stacks {
			v.stacks[s.Task.Name] = s
		}
	}
	for _, p := range []struct {
		c    *lab.Cgroup
		from lab.Pressure
		to   *lab.Pressure
	}{{r.cgs.sync, r.psiSync, &v.syncPSI}, {r.cgs.bg, r.psiBg, &v.bgPSI}} {
		now, err := p.c.Pressure()
		errs = append(errs, err)
		*p.to = now.Sub(p.from)
	}
	if r.env.hasJournal {
		v.journal0 = r.journal
		v.journal1, err = r.env.journal.Stats()
		errs = append(errs, err)
		jbd2, err := lab.ReadSchedStat(fmt.Sprintf("/proc/%d/schedstat", r.env.journal.Pid))
		errs = append(errs, err)
		v.jbd2 = jbd2.Sub(r.jbd2)
	}
	return v, errors.Join(errs...)
}

// arm runs the noisy writer once beside the victims, in fresh cgroups,
// with or without memcgd.
func (e experiment) arm(ctx context.Context, b *lab.Bench, env armEnv, tag, src string, a lab.Arm) (res result, err error) {
	start := time.Now()
	defer func() { res.wall = time.Since(start) }()
	if err := lab.DropCaches(); err != nil {
		return res, err
	}
	s := lab.Settle{File: b.File("e4-settle"), Bound: env.settle, Probes: lab.SettleProbes, Limit: lab.SettleLimit, Pause: lab.SettlePause, Idle: env.idle}
	if res.settleWait, res.settleSlowest, res.settled, err = s.Wait(ctx); err != nil {
		return res, err
	}
	res.load0, _ = lab.LoadAvg()
	cgs, err := e.cgroups(b, tag)
	if err != nil {
		return res, err
	}
	d, err := b.StartArm(ctx, a, e.config(b.Root.Path, a), cgs.writer)
	if err != nil {
		return res, err
	}
	vs, err := e.startVictims(ctx, b, env, tag, cgs)
	if err != nil {
		return res, err
	}
	w := lab.Writer{Bin: b.Writer, File: b.File("e4-" + tag), Size: uint64(e.size), Chunk: uint64(e.chunk), Rate: uint64(e.rate), Fsync: e.fsync, From: src}
	if a.SelfPaced {
		w.Budget = uint64(e.dirty)
	}
	d.BusyStart()
	res.w, _, err = w.Run(ctx, cgs.writer)
	d.BusyEnd()
	v, verr := vs.stop()
	if err = errors.Join(err, verr); err != nil {
		return res, err
	}
	res.victims = v
	res.load1, _ = lab.LoadAvg()
	if res.daemon, err = b.EndArm(ctx, d, cgs.writer); err != nil {
		return res, err
	}
	if err := lab.CheckUntouched(cgs.sync, cgs.bg); err != nil {
		return res, fmt.Errorf("memcgd touched a victim's cgroup: %w", err)
	}
	return res, e.cleanup(b, tag, cgs)
}
