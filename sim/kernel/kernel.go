// Package kernel is a discrete-event model of the Linux memory-management
// paths the seed patch sets change: memory cgroups and their limits, the
// page cache and its LRU lists, dirty throttling, the flushers, reclaim
// (kswapd, direct and limit), and block devices. One file per kernel
// source file it models (memcontrol.go for mm/memcontrol.c, vmscan.go for
// mm/vmscan.c, ...), with the kernel's constant and function names, so
// that a kernel engineer can read the model against the source. The three
// seed patch sets are small option structs plugged into hooks
// (seed000.go, seed001.go, seed004.go).
//
// The model is deterministic: a (time, sequence) ordered event heap, no
// map iteration, no wall clock. It allocates nothing per page: pages are
// counted in extents (see filemap.go).
package kernel

import (
	"fmt"

	"github.com/memcgd/memcgd/memcg"
)

// Config is the machine.
type Config struct {
	// CgroupVersion is 1 or 2.
	CgroupVersion int
	// HZ is the jiffy rate the throttle's arithmetic uses (CONFIG_HZ).
	HZ int64
	// MemoryPages is the zone's managed memory; ReservedPages what the
	// kernel and other processes hold of it.
	MemoryPages, ReservedPages int64
	// MinFreeKbytes is vm.min_free_kbytes (0: sized from memory as the
	// kernel does); WatermarkScaleFactor vm.watermark_scale_factor.
	MinFreeKbytes, WatermarkScaleFactor int64
	// VMDirty holds vm.dirty_ratio/bytes and vm.dirty_background_ratio/bytes.
	VMDirty memcg.Knobs
	// DirtyExpireInterval and DirtyWritebackInterval are
	// vm.dirty_expire_centisecs and vm.dirty_writeback_centisecs.
	DirtyExpireInterval, DirtyWritebackInterval Time
	// CPU costs per page: copying a write or a read, faulting anon, and
	// scanning in reclaim.
	WriteCostPerPage, ReadCostPerPage, AnonCostPerPage, ScanCostPerPage Time
	// JournalCommitPages is the journal write an fdatasync() makes after
	// the file's data (sync.go); 0: none.
	JournalCommitPages int64
	// Disks are the block devices.
	Disks []DiskConfig
}

// Options select the in-kernel variants; nil fields are the stock kernel.
type Options struct {
	Seed000 *Seed000
	Seed001 *Seed001
	Seed004 *Seed004
	// Throttle2633 replaces the dirty throttle with 2.6.33's
	// (page_writeback_2633.go).
	Throttle2633 *Throttle2633
}

// Kernel is the simulated machine.
type Kernel struct {
	cfg  Config
	opts Options
	now  Time
	heap eventHeap

	ext     []extent
	extFree int32
	inodes  []inode
	memcgs  []Memcg
	tasks   []*Task
	live    int
	wbs     []bdiWriteback
	rootWB  []int32
	disks   []disk
	node    node

	globalDomain      wbDomain
	domainCompletions int64
	domainComplPeriod int64

	// cpuGroups are the cpu groups (task groups) of CFS bandwidth
	// control, the root first (sched_fair_bandwidth.go).
	cpuGroups []cfsBandwidth

	tickers []ticker
	timers  []timer
	// thresholds armed (memcontrol_threshold.go), and the hook they call.
	watches int
	onWatch func(k *Kernel, m int32)

	// Events counts processed events.
	Events int64
}

type ticker struct {
	period Time
	f      func(k *Kernel)
}

// New builds a machine with its root cgroup and one root wb per disk.
func New(cfg Config, opts Options) (*Kernel, error) {
	if cfg.CgroupVersion != 1 && cfg.CgroupVersion != 2 {
		return nil, fmt.Errorf("cgroup version %d: allowed 1 or 2", cfg.CgroupVersion)
	}
	if cfg.HZ <= 0 {
		cfg.HZ = 250
	}
	if len(cfg.Disks) == 0 {
		return nil, fmt.Errorf("no disks")
	}
	k := &Kernel{cfg: cfg, opts: opts, extFree: nilIdx}
	for _, d := range cfg.Disks {
		if d.WriteBandwidth <= 0 || d.ReadBandwidth <= 0 || d.NrRequests <= 0 || d.MaxRequestPages <= 0 {
			return nil, fmt.Errorf("disk %s: bandwidths, nr_requests and max request size must be positive", d.Name)
		}
		k.disks = append(k.disks, disk{cfg: d})
	}
	k.node.managed = cfg.MemoryPages
	k.node.reserved = cfg.ReservedPages
	mfk := cfg.MinFreeKbytes
	if mfk == 0 {
		mfk = DefaultMinFreeKbytes(cfg.MemoryPages)
	}
	sf := cfg.WatermarkScaleFactor
	if sf == 0 {
		sf = 10
	}
	k.node.setupWatermarks(mfk, sf)
	k.addMemcg(nilIdx, "/", noLimit, noLimit)
	k.initCFSBandwidth()
	for i := range k.disks {
		k.rootWB = append(k.rootWB, k.newWB(int32(i), 0))
		k.memcgs[0].wbs[i] = k.rootWB[i]
	}
	_, thresh := k.globalDirtyLimits()
	k.globalDomain.dirtyLimit = thresh
	return k, nil
}

// NewMemcg creates a child of parent with a limit (v1 limit_in_bytes, v2
// memory.max) and, on v2, memory.high, both in bytes (-1: none).
func (k *Kernel) NewMemcg(parent int32, name string, limit, high int64) int32 {
	toPages := func(b int64) int64 {
		if b < 0 {
			return noLimit
		}
		return b / PageSize
	}
	return k.addMemcg(parent, name, toPages(limit), toPages(high))
}

// Now is the current simulated time.
func (k *Kernel) Now() Time { return k.now }

// Config returns the machine's configuration.
func (k *Kernel) Config() Config { return k.cfg }

// Every calls f every period, first at first (the memcgd driver and the
// samplers). Tickers are set up before Run; f must not block.
func (k *Kernel) Every(first, period Time, f func(k *Kernel)) {
	k.tickers = append(k.tickers, ticker{period: period, f: f})
	k.heap.push(first, evHook, int32(len(k.tickers)-1), 0)
}

// Live is the number of tasks not finished.
func (k *Kernel) Live() int { return k.live }

// Run processes events until every task has finished or until is reached,
// and returns the time it stopped at.
func (k *Kernel) Run(until Time) Time { return k.run(until, true) }

// Advance processes every event up to until, whether or not tasks are
// left (the flushers and disks go on after the last task exits).
func (k *Kernel) Advance(until Time) Time {
	k.run(until, false)
	k.now = max(k.now, until)
	return k.now
}

func (k *Kernel) run(until Time, stopWhenIdle bool) Time {
	for k.heap.len() > 0 && (k.live > 0 || !stopWhenIdle) {
		if k.heap.ev[0].at > until {
			k.now = until
			return k.now
		}
		ev := k.heap.pop()
		k.now = ev.at
		k.Events++
		switch ev.kind {
		case evTask:
			t := k.tasks[ev.id]
			if ev.gen == t.gen {
				k.taskEvent(t)
			}
		case evIODone:
			k.ioDone(ev.id)
		case evFlusher:
			if ev.gen == k.wbs[ev.id].gen {
				k.flusherRun(ev.id)
			}
		case evKswapd:
			k.kswapdRun()
		case evMemcgKswapd:
			if k.opts.Seed001 != nil && ev.gen == k.memcgs[ev.id].kswapd.gen {
				k.opts.Seed001.run(k, ev.id)
			}
		case evThrottleTimeout:
			t := k.tasks[ev.id]
			if ev.gen == t.gen {
				k.throttleTimeout(t)
			}
		case evTimer:
			if tm := &k.timers[ev.id]; ev.gen == tm.gen && tm.armed {
				tm.armed = false
				tm.f(k)
			}
		case evCFSPeriod:
			if ev.gen == k.cpuGroups[ev.id].timerGen {
				k.cfsPeriodTimer(ev.id)
			}
		case evHook:
			tk := &k.tickers[ev.id]
			tk.f(k)
			if tk.period > 0 {
				k.heap.push(k.now+tk.period, evHook, ev.id, 0)
			}
		}
	}
	return k.now
}

// afterCharge runs the hooks that watch usage after a charge (seed 001's
// watermark check).
func (k *Kernel) afterCharge(m int32) {
	if o := k.opts.Seed001; o != nil {
		o.check(k, m)
	}
	if k.watches > 0 {
		k.checkThresholds(m)
	}
}

// After calls f once at time at.
func (k *Kernel) After(at Time, f func(k *Kernel)) {
	k.tickers = append(k.tickers, ticker{f: f})
	k.heap.push(at, evHook, int32(len(k.tickers)-1), 0)
}

// PageOps is the model's page operations so far: pages dirtied, started
// and finished writeback, scanned, freed, activated, deactivated and read.
func (k *Kernel) PageOps() int64 {
	v := &k.node.vmstat
	var read int64
	for i := range k.disks {
		read += k.disks[i].read
	}
	root := &k.memcgs[0]
	return v[NrDirtied] + 2*v[NrWritten] + root.hev[mePgscanKswapd] + root.hev[mePgscanDirect] +
		root.hev[mePgstealKswapd] + root.hev[mePgstealDirect] + root.hev[mePgactivate] + root.hev[mePgdeactivate] + read
}

// WBStartAll is how many wb_start_writeback ("write everything") requests
// reclaim made, and how many seed 000 replaced with a targeted write-out.
func (k *Kernel) WBStartAll() (full, memcgFirst int64) {
	return k.node.wbStartAll[WBReasonVmscan], k.node.memcgFirst
}
