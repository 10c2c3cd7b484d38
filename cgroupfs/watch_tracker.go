package cgroupfs

import (
	"github.com/memcgd/memcgd/cgroupfs/watch"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// TrackedWatcher is the Watcher of an FS: a Watcher whose cgroups are
// also reported, through the Watcher's own coalescing queue, when the
// eBPF tracker sees them pass Wake.DirtiedAbove (an absolute value of
// FS.Dirtied). With the tracker in force on cgroup v2 it arms no PSI
// trigger (one psimon kernel thread per cgroup before Linux 6.5): a
// dirtying cgroup is reported by the tracker within a millisecond, and
// reclaim against its limit by memory.events.local. The memory.current
// poll stays for the cgroups watched with a UsageAbove: the tracker sees
// pages dirtied, not the anonymous and clean page-cache growth that
// brings a cgroup to its low watermark (docs/lab/2026-11-30-fastpath.md); its schedule
// reads a cgroup far from its threshold rarely (watch/watch_schedule.go), and
// with a tracker policy sets UsageAbove from the watermarks alone. Without
// the tracker it is the plain Watcher and ignores DirtiedAbove.
//
// Get one from FS.NewWatcher. It is safe for concurrent use.
type TrackedWatcher struct {
	*watch.Watcher
	fast *fastPath
}

var _ host.Watcher = (*TrackedWatcher)(nil)

// NewWatcher returns the Watcher of fs's cgroups. With the tracker in
// force, opts.NoPSI is set.
func (fs *FS) NewWatcher(opts watch.WatcherOptions) (*TrackedWatcher, error) {
	if fs.fast.tr != nil {
		opts.NoPSI = true
	}
	w, err := watch.NewWatcher(fs.layout, opts)
	if err != nil {
		return nil, err
	}
	tw := &TrackedWatcher{Watcher: w, fast: fs.fast}
	if fs.fast.tr != nil {
		// Called by the tracker's dispatcher, with no lock held. It
		// may run after Close (the sink is removed then), which
		// ReportOnce allows for.
		fs.fast.setWake(w.ReportOnce)
	}
	return tw, nil
}

// Watch starts or replaces the watch of cg: the kernel's notifications
// for wake.UsageAbove as Watcher.Watch, and, with the tracker, a wake-up
// once the tracker's counter for cg passes wake.DirtiedAbove (0 or
// memcg.NoLimit: none), and, where it counts levels (DirtyPath.Levels),
// once cg's dirty+writeback leaves wake.LevelBelow..LevelAbove. Each
// wake-up is sent once per Watch call; a value already passed fires at
// cg's next dirtied page.
func (tw *TrackedWatcher) Watch(cg host.Cgroup, wake host.Wake) error {
	if err := tw.Watcher.Watch(cg, host.Wake{UsageAbove: wake.UsageAbove, OnlyArmed: wake.OnlyArmed}); err != nil {
		return err
	}
	if tw.fast.tr == nil {
		return nil
	}
	if err := tw.fast.arm(cg, wake.DirtiedAbove); err != nil {
		return err
	}
	if tw.fast.tr.CountsLevels() {
		return tw.fast.armLevel(cg, wake.LevelAbove, wake.LevelBelow)
	}
	return nil
}

// Unwatch stops watching cg. The tracker keeps counting for it, since
// FS.Dirtied's counter must stay monotonic, but sends no wake-up.
func (tw *TrackedWatcher) Unwatch(cg host.Cgroup) {
	tw.Watcher.Unwatch(cg)
	if tw.fast.tr != nil {
		_ = tw.fast.arm(cg, 0) // a cgroup gone meanwhile has nothing armed
		if tw.fast.tr.CountsLevels() {
			_ = tw.fast.armLevel(cg, memcg.NoLimit, 0)
		}
	}
}

// Close stops every watch and the tracker's wake-ups, and closes Events.
func (tw *TrackedWatcher) Close() error {
	if tw.fast.tr != nil {
		tw.fast.setWake(nil)
	}
	return tw.Watcher.Close()
}
