package cgroupfs

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/act"
	"github.com/memcgd/memcgd/cgroupfs/dirtytrack"
	"github.com/memcgd/memcgd/cgroupfs/watch"
	"github.com/memcgd/memcgd/host"
)

// DirtyPath says whether the eBPF tracker is in force (FSOptions.Tracker).
func (fs *FS) DirtyPath() host.DirtyPath { return fs.fast.path() }

// Tracker returns the eBPF dirty tracker in force, or nil.
func (fs *FS) Tracker() *dirtytrack.Tracker { return fs.fast.tr }

// Freeze begins a throttle episode of cg (act.Freeze)
// that the caller holds across steps: Thaw, Refreeze, End. On cgroup v1,
// a memory cgroup with no freezer cgroup at its path gets one
// (EnsureFreezer, before every Freeze: the re-sweep of tasks that joined
// since); where that cannot work the error is a *act.ThrottleUnavailable
// (errors.Is ErrUnsupported), and ThrottleUnavailable(cg) says why until
// a later Freeze or Pause of cg succeeds. The directories made are
// removed when cg is (Forget). The episode ends when ctx ends.
func (fs *FS) Freeze(ctx context.Context, cg host.Cgroup) (host.Frozen, error) {
	if fs.journal == nil {
		return nil, fmt.Errorf("freeze %s: read-only host has no journal", cg)
	}
	fs.holdAnchor(ctx, cg)
	var made []string
	f, err := act.FreezeMirrored(ctx, fs.layout, fs.procRoot, cg, fs.journal, &made)
	fs.fast.froze(cg, made, err)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// ThrottleUnavailable returns why cg cannot be throttled, as its last
// Freeze or Pause found, or "".
func (fs *FS) ThrottleUnavailable(cg host.Cgroup) string { return fs.fast.throttleUnavailable(cg) }

// Forget drops what FS holds for a cgroup the driver stops managing: its
// tracker id and count, its write-out cursor, and the freezer directories
// FS made for it (RemoveFreezer, which leaves a directory still in use). It is
// host.Forgetter: FS never forgets a cgroup by itself, not even one its
// cgroup notifier reports removed. A cgroup that still exists is looked
// up again at its next use.
func (fs *FS) Forget(cg host.Cgroup) {
	fs.writeOuts.Forget(cg)
	fs.fast.forget(cg)
	fs.squeezes.forget(cg)
	fs.squeezeLog.forget(cg)
	if fs.pacer != nil {
		fs.pacer.Forget(cg)
	}
}

// Pace begins pacing cg's dirtying threads at quota per period
// (host.Pacer, act.Pacer): an error wrapping errors.ErrUnsupported says
// the hierarchy does not let memcgd pace this cgroup.
func (fs *FS) Pace(ctx context.Context, cg host.Cgroup, quota, period time.Duration) (host.Paced, error) {
	if fs.pacer == nil {
		return nil, fmt.Errorf("pace %s: read-only host has no journal", cg)
	}
	return fs.pacer.Pace(ctx, cg, quota, period)
}

// trackedInodes lists the files the tracker recorded for cg: all of
// them, or only the ones its subtree dirtied last.
func (fs *FS) trackedInodes(cg host.Cgroup, all bool) ([]dirtytrack.Inode, error) {
	id, err := fs.fast.count(cg)
	if err != nil {
		return nil, fmt.Errorf("write out %s: tracked files: %w", cg, err)
	}
	list := fs.fast.tr.Recent
	if all {
		list = fs.fast.tr.Inodes
	}
	inodes, err := list(id)
	if errors.Is(err, dirtytrack.ErrNotWatched) {
		// Its rmdir unwatched it since the step that decided the
		// write-out, as in fastPath.counts.
		return nil, fmt.Errorf("write out %s: tracked files: %w: %w", cg, host.ErrVanished, err)
	}
	if err != nil {
		return nil, fmt.Errorf("write out %s: tracked files: %w", cg, err)
	}
	return inodes, nil
}

// CgroupEvents reports the cgroups created and removed beneath the managed
// subtree until ctx ends, then closes the channel: from the tracker's
// cgroup_mkdir/cgroup_rmdir tracepoints when it is in force and has them,
// otherwise from inotify (watch.WatchNewCgroups). What FS holds for a
// removed cgroup stays until the receiver calls Forget. Reports never
// block the sources: past watch.DefaultNewCgroupsQueue waiting ones they
// are dropped and a Rescan is sent once there is room. With the tracker, a cgroup created a moment
// before the call may be reported too (its event was still queued). It
// may be called once.
func (fs *FS) CgroupEvents(ctx context.Context) (<-chan host.CgroupEvent, error) {
	if !fs.notifying.CompareAndSwap(false, true) {
		return nil, errors.New("cgroup events: already started")
	}
	in := make(chan host.CgroupEvent, watch.DefaultNewCgroupsQueue)
	// owed says a report was dropped; dropped wakes the forwarder to
	// send the Rescan it owes even if no report follows. (A ticker did
	// that before: 100 wake-ups a second of an idle daemon, for nothing.)
	var owed atomic.Bool
	dropped := make(chan struct{}, 1)
	push := func(ev host.CgroupEvent) {
		if paceGroupEvent(ev.Cgroup) {
			return // memcgd's own (own.go)
		}
		select {
		case in <- ev:
		default:
			owed.Store(true)
			select {
			case dropped <- struct{}{}:
			default:
			}
		}
	}
	var stop func()
	if fs.fast.tr != nil && fs.fast.tr.CgroupEvents() {
		fs.fast.setNotify(push)
		stop = func() { fs.fast.setNotify(nil) }
	} else {
		nc, err := watch.WatchNewCgroups(fs.layout.Memory, fs.under, watch.NewCgroupsOptions{Logger: fs.log})
		if err != nil {
			fs.notifying.Store(false)
			return nil, fmt.Errorf("cgroup events: %w", err)
		}
		go func() {
			for ev := range nc.Events() {
				push(host.CgroupEvent{Cgroup: ev.Cgroup, Removed: ev.Removed, Rescan: ev.Rescan})
			}
		}()
		stop = func() { _ = nc.Close() }
	}
	out := make(chan host.CgroupEvent)
	go func() {
		defer close(out)
		defer stop()
		for {
			var ev host.CgroupEvent
			select {
			case <-ctx.Done():
				return
			case ev = <-in:
			case <-dropped:
			}
			if owed.CompareAndSwap(true, false) {
				select {
				case out <- host.CgroupEvent{Cgroup: fs.under, Rescan: true}:
				case <-ctx.Done():
					return
				}
			}
			if ev == (host.CgroupEvent{}) {
				continue
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}
