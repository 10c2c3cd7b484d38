// Package cgroupfs is the real kernel as a host.Host: FS composes the
// packages beneath it into the interface the agent drives (host.Host and
// its optional interfaces: DirtyCounter, FastPath, Freezer, Pacer,
// CgroupNotifier, Forgetter), and adds the eBPF dirty tracker's share of
// the work (fastPath; TrackedWatcher, the Watcher of an FS).
//
// The packages beneath, each with a small API:
//
//	layout      where the hierarchies are (Discover, Layout, Walk)
//	ctlfile     reads and writes of control files, a cgroup's identity
//	format      one parser per kernel file
//	observe     a cgroup's state (Reader)
//	journal     the undo journal; Journal.Apply changes a control file
//	safeio      bounded, checked I/O on tenants' files
//	act         the actuators: reclaim, write-out, flush, freeze and pause
//	watch       the Watcher and the new-cgroup watch
//	dirtytrack  the optional eBPF dirty tracker
//
// # Per-cgroup state and its owner
//
// FS keeps, per cgroup: fastPath's maps (the cgroup's kernfs id and back,
// whether the tracker counts for it, the freezer directories FS made for
// it, why it cannot be throttled, when its files were last listed), and,
// through the TrackedWatcher, the Watcher's watches. Their lifetime is
// the caller's: an entry is made by the caller's Watch, Dirtied, WriteOut,
// Freeze or Pause of the cgroup and dropped by its Unwatch (the watch) or
// Forget (everything else, host.Forgetter), which the driver calls once
// when it stops managing the cgroup. cgroupfs never decides by itself
// that a cgroup is gone, with one exception forced by the kernel: the
// Watcher closes the file descriptors of a watch whose cgroup the kernel
// reports removed (they are dead; a removed cgroup's PSI trigger would
// poll as an error for ever) and reports the cgroup, whose Unwatch then
// finds nothing left to close. The tracker's own count of a removed
// cgroup is dropped by the tracker (its cgroup_rmdir program); fastPath
// notes that, so that Forget does not drop it twice.
//
// Lock order: fastPath.mu before the Tracker's (a leaf); neither is held
// while calling the Watcher (ReportOnce takes its mu).
package cgroupfs
