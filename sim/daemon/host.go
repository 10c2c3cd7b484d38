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

// Dirtied is the bytes cg's tasks have dirtied.
func (h *Host) Dirtied(ctx context.Context, cg host.Cgroup) (uint64, error) {
	s, err := h.Observe(ctx, cg)
	return s.Counters.DirtiedBytes, err
}

// Reclaim is memory.reclaim.
func (h *Host) Reclaim(_ context.Context, cg host.Cgroup, n uint64) (uint64, error) {
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

// WriteOut starts write-out of cg's own dirty inodes.
func (h *Host) WriteOut(_ context.Context, cg host.Cgroup) (host.WriteOut, error) {
	m, err := h.id(cg)
	if err != nil {
		return host.WriteOut{}, err
	}
	n := h.k.WriteoutMemcg(m, kernel.WBReasonTargeted, false)
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
