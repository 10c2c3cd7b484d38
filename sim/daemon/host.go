// Package daemon runs memcgd against the simulated kernel: Host
// implements host.Host over a *kernel.Kernel on the simulated clock;
// Driver and Loop step policy.Controller as models of the agent's loop
// (every interval; on the policy.Decision contract); Agent runs the real
// agent (package agent) on the simulated clock, deterministically.
package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/sim/kernel"
)

var _ host.Host = (*Host)(nil)
var _ host.DirtyCounter = (*Host)(nil)

// epoch is the wall-clock time the simulation's zero maps to: fixed, so
// that runs are deterministic.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Host is the simulated kernel as memcgd sees it.
type Host struct {
	k     *kernel.Kernel
	ids   map[host.Cgroup]int32
	paths []host.Cgroup // by memcg id
	// Counters of what the daemon did.
	WriteOuts, Flushes, Pauses int64
	Reclaimed                  int64 // bytes
	// Paused is the sum of the timed pauses asked for, overlapping ones
	// included; Frozen the time some managed cgroup was actually stopped
	// (timed pauses and held freezes, overlaps counted once per cgroup).
	Paused, Frozen time.Duration
	// Freezes counts held freezes; LongestFreeze is the longest.
	Freezes       int64
	LongestFreeze time.Duration

	stoppedUntil map[host.Cgroup]kernel.Time // end of the latest timed pause
	frozenAt     map[host.Cgroup]kernel.Time // start of a held freeze
}

// NewHost wraps k. Cgroup paths are the kernel's cgroup names.
func NewHost(k *kernel.Kernel) *Host {
	h := &Host{k: k, ids: map[host.Cgroup]int32{}, stoppedUntil: map[host.Cgroup]kernel.Time{}, frozenAt: map[host.Cgroup]kernel.Time{}}
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

// Pause freezes cg's tasks for d. On the simulated clock it returns at
// once; the tasks stop at their next system call until d has passed.
func (h *Host) Pause(_ context.Context, cg host.Cgroup, d time.Duration) error {
	m, err := h.id(cg)
	if err != nil {
		return err
	}
	for _, t := range h.k.Tasks(m) {
		h.k.Freeze(t, kernel.Time(d))
	}
	h.Pauses++
	h.Paused += d
	now, end := h.k.Now(), h.k.Now()+kernel.Time(d)
	if until := h.stoppedUntil[cg]; end > until {
		h.Frozen += time.Duration(end - max(now, until))
		h.stoppedUntil[cg] = end
	}
	return nil
}

// Freeze freezes cg until Thaw (cgroup.freeze 1, or the v1 freezer's
// FROZEN): the closed-loop throttle's freezer.
func (h *Host) Freeze(_ context.Context, cg host.Cgroup) error {
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

// Thaw thaws cg.
func (h *Host) Thaw(_ context.Context, cg host.Cgroup) error {
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

// IsFrozen reports whether cg is held frozen.
func (h *Host) IsFrozen(cg host.Cgroup) bool {
	m, err := h.id(cg)
	return err == nil && h.k.CgroupFrozen(m)
}

// Kernel is the simulated kernel under the Host.
func (h *Host) Kernel() *kernel.Kernel { return h.k }

// Now is the simulated clock.
func (h *Host) Now() time.Time { return epoch.Add(time.Duration(h.k.Now())) }
