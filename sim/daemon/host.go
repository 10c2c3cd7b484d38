// Package daemon runs memcgd against the simulated kernel: Host
// implements host.Host over a *kernel.Kernel on the simulated clock, and
// Daemon drives the shipped daemon's scheduler (package sched), with the
// real policy, on it: the simulated daemon is the one memcgd runs.
package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/sim/kernel"
)

var (
	_ host.Host         = (*Host)(nil)
	_ host.DirtyCounter = (*Host)(nil)
	_ host.Freezer      = (*Host)(nil)
)

// epoch is the wall-clock time the simulation's zero maps to: fixed, so
// that runs are deterministic.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Host is the simulated kernel as memcgd sees it.
type Host struct {
	k     *kernel.Kernel
	ids   map[host.Cgroup]int32
	paths []host.Cgroup // by memcg id
	// Counters of what the daemon did.
	WriteOuts, Flushes int64
	Reclaimed          int64 // bytes
	// Frozen is the time managed cgroups were frozen, summed over them.
	Frozen time.Duration
	// Freezes counts freezes and refreezes; LongestFreeze is the longest.
	Freezes       int64
	LongestFreeze time.Duration
	// Paces counts pacing episodes; PaceSets the pace writes within
	// them (SetPace ops).
	Paces, PaceSets int64

	frozenAt map[host.Cgroup]kernel.Time // start of the freeze in force
}

// NewHost wraps k. Cgroup paths are the kernel's cgroup names.
func NewHost(k *kernel.Kernel) *Host {
	h := &Host{k: k, ids: map[host.Cgroup]int32{}, frozenAt: map[host.Cgroup]kernel.Time{}}
	for m := int32(0); m < int32(k.MemcgCount()); m++ {
		p := host.Cgroup(k.MemcgName(m))
		h.ids[p] = m
		h.paths = append(h.paths, p)
	}
	return h
}

func (h *Host) id(cg host.Cgroup) (int32, error) {
	m, ok := h.ids[cg]
	if !ok {
		return 0, fmt.Errorf("cgroup %s: %w", cg, host.ErrVanished)
	}
	return m, nil
}

// Cgroups lists every cgroup, parents before children (creation order).
func (h *Host) Cgroups(context.Context) ([]host.Cgroup, error) {
	return append([]host.Cgroup(nil), h.paths...), nil
}

// Observe reads cg's state.
func (h *Host) Observe(_ context.Context, cg host.Cgroup) (memcg.Stat, error) {
	m, err := h.id(cg)
	if err != nil {
		return memcg.Stat{}, err
	}
	return h.k.Stat(m), nil
}

// DirtyCounts is the bytes cg's tasks have dirtied; the model truncates
// no file, so it counts no cancellation.
func (h *Host) DirtyCounts(ctx context.Context, cg host.Cgroup) (host.DirtyCounts, error) {
	s, err := h.Observe(ctx, cg)
	return host.DirtyCounts{Dirtied: s.Counters.DirtiedBytes}, err
}

// Reclaim is memory.reclaim.
func (h *Host) Reclaim(_ context.Context, cg host.Cgroup, n, _ uint64) (uint64, error) {
	m, err := h.id(cg)
	if err != nil {
		return 0, err
	}
	got := uint64(h.k.ProactiveReclaim(m, int64((n+kernel.PageSize-1)/kernel.PageSize))) * kernel.PageSize
	h.Reclaimed += int64(got)
	if got == 0 {
		return 0, host.ErrNothingReclaimed
	}
	return got, nil
}

// WriteOut starts write-out of cg's own dirty inodes, all of them: the
// model's SyncMemcg needs no bound from the caller's dirty, and Bytes is
// what it queued.
func (h *Host) WriteOut(_ context.Context, cg host.Cgroup, _ uint64) (host.WriteOut, error) {
	m, err := h.id(cg)
	if err != nil {
		return host.WriteOut{}, err
	}
	n := h.k.SyncMemcg(m)
	h.WriteOuts++
	return host.WriteOut{Files: 1, Bytes: uint64(n) * kernel.PageSize}, nil
}

// Flush starts write-out of every dirty page.
func (h *Host) Flush(_ context.Context, cg host.Cgroup) error {
	if _, err := h.id(cg); err != nil {
		return err
	}
	h.k.FlushAll(kernel.WBReasonVmscan)
	h.Flushes++
	return nil
}

// Freeze freezes cg until the episode thaws or ends it (cgroup.freeze 1,
// or the v1 freezer's FROZEN): the closed-loop throttle's freezer.
func (h *Host) Freeze(_ context.Context, cg host.Cgroup) (host.Frozen, error) {
	if err := h.freeze(cg); err != nil {
		return nil, err
	}
	return &episode{h: h, cg: cg}, nil
}

func (h *Host) freeze(cg host.Cgroup) error {
	m, err := h.id(cg)
	if err != nil {
		return err
	}
	if h.k.CgroupFrozen(m) {
		return fmt.Errorf("freeze %s: already frozen", cg)
	}
	h.k.FreezeCgroup(m)
	h.frozenAt[cg] = h.k.Now()
	h.Freezes++
	return nil
}

func (h *Host) thaw(cg host.Cgroup) error {
	m, err := h.id(cg)
	if err != nil {
		return err
	}
	if !h.k.CgroupFrozen(m) {
		return fmt.Errorf("thaw %s: not frozen", cg)
	}
	h.k.ThawCgroup(m)
	held := time.Duration(h.k.Now() - h.frozenAt[cg])
	h.Frozen += held
	h.LongestFreeze = max(h.LongestFreeze, held)
	delete(h.frozenAt, cg)
	return nil
}

// episode is one throttle episode of a cgroup (host.Frozen).
type episode struct {
	h     *Host
	cg    host.Cgroup
	ended bool
}

func (e *episode) Thaw() error     { return e.h.thaw(e.cg) }
func (e *episode) Refreeze() error { return e.h.freeze(e.cg) }

// End thaws the cgroup if it is frozen and ends the episode.
func (e *episode) End() error {
	if e.ended {
		return nil
	}
	e.ended = true
	if e.h.IsFrozen(e.cg) {
		return e.h.thaw(e.cg)
	}
	return nil
}

// IsFrozen reports whether cg is held frozen.
func (h *Host) IsFrozen(cg host.Cgroup) bool {
	m, err := h.id(cg)
	return err == nil && h.k.CgroupFrozen(m)
}

// Kernel is the simulated kernel under the Host.
func (h *Host) Kernel() *kernel.Kernel { return h.k }

// Now is the simulated clock.
func (h *Host) Now() time.Time { return epoch.Add(time.Duration(h.k.Now())) }

var _ host.Pacer = (*Host)(nil)

// Pace puts cg's dirtying tasks (those that have written pages) in a cpu
// group of their own, beneath the group the first of them runs in, at
// quota per period: the CFS bandwidth model (sim/kernel,
// sched_fair_bandwidth.go), as the real pacer makes a pace group beneath
// the threads' own cpu cgroup. Tasks that begin writing later join it at
// the next Set.
func (h *Host) Pace(_ context.Context, cg host.Cgroup, quota, period time.Duration) (host.Paced, error) {
	m, err := h.id(cg)
	if err != nil {
		return nil, err
	}
	e := &paced{h: h, m: m, g: -1, home: map[*kernel.Task]int32{}}
	if err := e.Set(quota, period); err != nil {
		return nil, err
	}
	h.Paces++
	return e, nil
}

// paced is one pacing episode on the simulated kernel (host.Paced).
type paced struct {
	h     *Host
	m     int32
	g     int32 // the pace group; -1 until a dirtier is found
	home  map[*kernel.Task]int32
	tasks []*kernel.Task // in the order they were paced
	ended bool
}

// Set paces the cgroup's dirtiers at quota per period.
func (e *paced) Set(quota, period time.Duration) error {
	if e.ended {
		return nil
	}
	k := e.h.k
	for _, t := range k.Tasks(e.m) {
		if t.Written == 0 || t.Done() {
			continue
		}
		if _, ok := e.home[t]; ok {
			continue
		}
		if e.g < 0 {
			e.g = k.NewCPUGroup(k.CPUGroupOf(t), k.MemcgName(e.m)+"/memcgd.pace")
		}
		e.home[t] = k.CPUGroupOf(t)
		e.tasks = append(e.tasks, t)
		k.MoveTask(t, e.g)
	}
	if e.g < 0 {
		return nil
	}
	q := kernel.Time(quota)
	if quota == 0 {
		q = kernel.RuntimeInf
	}
	return k.SetCPUMax(e.g, q, kernel.Time(period), 0)
}

// CPU is the pace group's cpu.stat usage.
func (e *paced) CPU() (time.Duration, error) {
	if e.g < 0 {
		return 0, nil
	}
	return time.Duration(e.h.k.CPUStat(e.g).Usage), nil
}

// Throttled is the pace group's cpu.stat throttled time.
func (e *paced) Throttled() (time.Duration, error) {
	if e.g < 0 {
		return 0, nil
	}
	return time.Duration(e.h.k.CPUStat(e.g).ThrottledTime), nil
}

var _ host.PacedThrottled = (*paced)(nil)

// End puts the tasks back in their groups and lifts the group's quota.
func (e *paced) End() error {
	if e.ended {
		return nil
	}
	e.ended = true
	if e.g < 0 {
		return nil
	}
	k := e.h.k
	for _, t := range e.tasks {
		k.MoveTask(t, e.home[t])
	}
	return k.SetCPUMax(e.g, kernel.RuntimeInf, kernel.DefaultCFSPeriod, 0)
}
