package watch

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
)

// NewCgroups reports cgroups created and removed beneath a subtree of one
// hierarchy as they come and go, so that the daemon manages a new cgroup
// within milliseconds instead of at its next periodic scan. It needs no
// eBPF: one inotify(7) watch per cgroup directory (IN_CREATE on mkdir, from
// fs/namei.c vfs_mkdir -> fsnotify_mkdir, which cgroupfs goes through like
// any filesystem; IN_DELETE_SELF on rmdir). An eBPF tracker may deliver
// cgroup_mkdir too; this is the fallback that works alone.
//
// A cgroup is reported once; one created beneath another a moment after it
// is still reported: after the watch on a new directory is added, the
// directory is listed, so that children created before the watch are
// found. Reports never block the watcher: past Options.Queue waiting
// reports, or when the kernel's own queue overflowed (IN_Q_OVERFLOW), it
// drops, counts (Dropped) and sends a Rescan report as soon as there is
// room. Past Options.MaxWatches directories it stops adding watches, logs
// it once, and Complete turns false: the periodic scan must cover the
// rest.
//
// Start it before the initial scan, so that no cgroup falls between the
// two. docs/newcgroups.md has the cost, measured with 10,000 cgroups. A
// NewCgroups is safe for concurrent use.
type NewCgroups struct {
	h     layout.Hierarchy
	under host.Cgroup
	opts  NewCgroupsOptions

	file *os.File        // the inotify instance, nonblocking, in Go's poller
	raw  syscall.RawConn // for inotify_add_watch, which must not race Close
	out  chan CgroupEvent

	dropped  atomic.Uint64
	watches  atomic.Int64
	complete atomic.Bool
	loopDone chan struct{}

	closeOnce sync.Once

	// Owned by the loop goroutine (and by WatchNewCgroups before it
	// starts): the watched directories by descriptor and by cgroup.
	paths        map[int32]host.Cgroup
	wds          map[host.Cgroup]int32
	rescan       bool // a Rescan is owed to the receiver
	loggedLimits bool
}

// CgroupEvent is one report of NewCgroups.
type CgroupEvent struct {
	// Cgroup is the cgroup created or removed; for a Rescan, the watched
	// subtree.
	Cgroup host.Cgroup
	// Removed: the cgroup was removed; otherwise it was created.
	Removed bool
	// Rescan: reports were lost; the receiver must list the subtree again.
	Rescan bool
}

// NewCgroupsOptions bound what NewCgroups holds.
type NewCgroupsOptions struct {
	// MaxWatches bounds the inotify watches, one per cgroup directory
	// (DefaultMaxWatches when 0). The kernel's fs.inotify.max_user_watches
	// bounds them too, for all of root's processes together.
	MaxWatches int
	// Queue is how many reports may wait for the receiver
	// (DefaultNewCgroupsQueue when 0).
	Queue int
	// Logger receives the one-time notice that the watches ran out (slog
	// default when nil).
	Logger *slog.Logger
}

// Defaults of NewCgroupsOptions.
const (
	DefaultMaxWatches      = 65536
	DefaultNewCgroupsQueue = 1024
)

// rescanRetry is how often a watcher owing a Rescan retries to send it
// while no event arrives.
const rescanRetry = 10 * time.Millisecond

// watchMask: subdirectories created (cgroups; the kernel makes control
// files itself, which raises no event) and removed, and renames (cgroup v1 allows renaming a cgroup within its parent,
// kernel/cgroup/cgroup.c cgroup_rename), which the watcher answers with a
// rescan. IN_ONLYDIR and IN_DONT_FOLLOW make sure only a directory, never
// a symbolic link, is watched.
//
// A removal is taken from the parent's IN_DELETE: on cgroupfs (kernfs) the
// removed directory's own watch gets neither IN_DELETE_SELF nor IN_IGNORED,
// measured on 6.18 v1 (the mark pins the inode, whose link count kernfs
// never drops to 0, so dentry_unlink_inode never calls
// fsnotify_inoderemove): the watcher removes that watch itself.
// IN_DELETE_SELF is still asked for, for the top of the subtree.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_DELETE_SELF | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW

// WatchNewCgroups watches under and every cgroup beneath it in h. The
// cgroups that exist already are not reported.
func WatchNewCgroups(h layout.Hierarchy, under host.Cgroup, o NewCgroupsOptions) (*NewCgroups, error) {
	if err := layout.CheckPath(under); err != nil {
		return nil, fmt.Errorf("watch new cgroups: %w", err)
	}
	if o.MaxWatches < 0 || o.Queue < 0 {
		return nil, fmt.Errorf("watch new cgroups: MaxWatches %d, Queue %d: want 0 (the default) or more", o.MaxWatches, o.Queue)
	}
	if o.MaxWatches == 0 {
		o.MaxWatches = DefaultMaxWatches
	}
	if o.Queue == 0 {
		o.Queue = DefaultNewCgroupsQueue
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if h.Dir(under) == "" {
		return nil, fmt.Errorf("watch new cgroups %s: outside the mounted subtree %s of %s", under, h.Root, h.Mount)
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("watch new cgroups: inotify_init1: %w", err)
	}
	w := &NewCgroups{
		h: h, under: under, opts: o,
		file:     os.NewFile(uintptr(fd), "inotify"),
		out:      make(chan CgroupEvent, o.Queue),
		loopDone: make(chan struct{}),
		paths:    map[int32]host.Cgroup{},
		wds:      map[host.Cgroup]int32{},
	}
	w.complete.Store(true)
	if w.raw, err = w.file.SyscallConn(); err != nil {
		w.file.Close()
		return nil, fmt.Errorf("watch new cgroups: %w", err)
	}
	w.addTree(under, false)
	if _, ok := w.wds[under]; !ok {
		// Ask again for the reason addTree skipped it.
		_, err := w.addWatch(h.Dir(under))
		w.file.Close()
		if err == nil || ctlfile.IsVanished(err) {
			err = host.ErrVanished
		}
		return nil, fmt.Errorf("watch new cgroups %s: %w", under, err)
	}
	go w.loop()
	return w, nil
}

// Events returns the reports. It is closed after Close.
func (w *NewCgroups) Events() <-chan CgroupEvent { return w.out }

// Dropped counts the reports dropped because the receiver fell behind or
// the kernel's queue overflowed; each drop is followed by a Rescan.
func (w *NewCgroups) Dropped() uint64 { return w.dropped.Load() }

// Watches is the number of directories watched.
func (w *NewCgroups) Watches() int { return int(w.watches.Load()) }

// Complete reports whether every cgroup of the subtree is watched; false
// once MaxWatches or the kernel's limit was reached.
func (w *NewCgroups) Complete() bool { return w.complete.Load() }

// Close stops the watcher and releases its watches; Events is then closed.
func (w *NewCgroups) Close() error {
	var err error
	w.closeOnce.Do(func() {
		err = w.file.Close() // wakes the loop's read
		<-w.loopDone
	})
	return err
}

// loop reads inotify events until Close.
func (w *NewCgroups) loop() {
	defer close(w.loopDone)
	defer close(w.out)
	// Room for the kernel's biggest batch of a few hundred events: a name
	// is at most NAME_MAX bytes.
	buf := make([]byte, 64<<10)
	for {
		if w.rescan {
			w.flushRescan()
		}
		var deadline time.Time
		if w.rescan {
			deadline = time.Now().Add(rescanRetry)
		}
		if err := w.file.SetReadDeadline(deadline); err != nil {
			return
		}
		n, err := w.file.Read(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			continue
		}
		if err != nil {
			return // closed
		}
		w.handle(buf[:n])
	}
}

// handle acts on one read's worth of events.
func (w *NewCgroups) handle(b []byte) {
	for len(b) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(b) {
			return // the kernel never splits an event; be safe anyway
		}
		name := cString(b[unix.SizeofInotifyEvent:end])
		b = b[end:]
		switch {
		case ev.Mask&unix.IN_Q_OVERFLOW != 0:
			w.dropped.Add(1)
			w.resync()
		case ev.Mask&(unix.IN_MOVED_FROM|unix.IN_MOVED_TO) != 0 && ev.Mask&unix.IN_ISDIR != 0:
			w.resync()
		case ev.Mask&unix.IN_CREATE != 0 && ev.Mask&unix.IN_ISDIR != 0:
			parent, ok := w.paths[ev.Wd]
			if !ok || name == "" {
				continue
			}
			w.addTree(host.Cgroup(path.Join(string(parent), name)), true)
		case ev.Mask&unix.IN_DELETE != 0 && ev.Mask&unix.IN_ISDIR != 0:
			parent, ok := w.paths[ev.Wd]
			if !ok || name == "" {
				continue
			}
			cg := host.Cgroup(path.Join(string(parent), name))
			wd, ok := w.wds[cg]
			if !ok {
				continue // not watched (past the limit), or reported by its IN_DELETE_SELF
			}
			w.forget(wd)
			_ = w.raw.Control(func(fd uintptr) { _, _ = unix.InotifyRmWatch(int(fd), uint32(wd)) })
			w.send(CgroupEvent{Cgroup: cg, Removed: true})
		case ev.Mask&unix.IN_DELETE_SELF != 0:
			if cg, ok := w.forget(ev.Wd); ok {
				w.send(CgroupEvent{Cgroup: cg, Removed: true})
			}
		case ev.Mask&unix.IN_IGNORED != 0:
			w.forget(ev.Wd) // the watch is gone (its directory was removed)
		}
	}
}

// cString returns the NUL-padded name of an inotify event.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// forget drops the watch descriptor wd from the maps.
func (w *NewCgroups) forget(wd int32) (host.Cgroup, bool) {
	cg, ok := w.paths[wd]
	if !ok {
		return "", false
	}
	delete(w.paths, wd)
	if w.wds[cg] == wd {
		delete(w.wds, cg)
	}
	w.watches.Add(-1)
	return cg, true
}

// addTree watches top and every directory beneath it that has no watch
// yet, reporting each as created when report is set. Each directory is
// listed after its watch is added, so that a child created in between is
// found by the listing or reported by the watch (and then known, and not
// reported twice). A directory that vanishes meanwhile is skipped.
func (w *NewCgroups) addTree(top host.Cgroup, report bool) {
	stack := []host.Cgroup{top}
	for len(stack) > 0 {
		cg := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, ok := w.wds[cg]; ok {
			continue // known: its children were listed when it was added
		}
		// A cgroup that cannot be watched is still reported; what is
		// created beneath it is left to the periodic scan.
		if int(w.watches.Load()) >= w.opts.MaxWatches {
			w.limit(fmt.Sprintf("MaxWatches (%d) reached", w.opts.MaxWatches), cg)
			if report {
				w.send(CgroupEvent{Cgroup: cg})
			}
			continue
		}
		dir := w.h.Dir(cg)
		wd, err := w.addWatch(dir)
		if ctlfile.IsVanished(err) || errors.Is(err, unix.ENOTDIR) {
			continue
		}
		if err != nil {
			why := err.Error()
			if errors.Is(err, unix.ENOSPC) {
				why = "the kernel's fs.inotify.max_user_watches reached"
			}
			w.limit(why, cg)
			if report {
				w.send(CgroupEvent{Cgroup: cg})
			}
			continue
		}
		if old, ok := w.paths[wd]; ok {
			// A directory watched under another path: renamed before its
			// IN_MOVED events were read. The resync they cause fixes
			// the names.
			delete(w.wds, old)
		} else {
			w.watches.Add(1)
		}
		w.paths[wd], w.wds[cg] = cg, wd
		if report {
			w.send(CgroupEvent{Cgroup: cg})
		}
		// A directory's link count is 2 plus its subdirectories
		// (fs/kernfs/inode.c kernfs_refresh_inode); read after the watch
		// is in place, 2 means no child can be missed, and most cgroups
		// are leaves whose ~30 control files need no listing.
		var st unix.Stat_t
		if err := unix.Lstat(dir, &st); err != nil || st.Nlink == 2 {
			continue // a leaf, or removed meanwhile: its IN_DELETE follows
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.IsDir() {
				stack = append(stack, host.Cgroup(path.Join(string(cg), e.Name())))
			}
		}
	}
}

// addWatch adds the watch on dir, holding the descriptor so that Close
// cannot release it meanwhile.
func (w *NewCgroups) addWatch(dir string) (int32, error) {
	var wd int
	var werr error
	err := w.raw.Control(func(fd uintptr) {
		wd, werr = unix.InotifyAddWatch(int(fd), dir, watchMask)
	})
	if err != nil {
		return 0, err
	}
	return int32(wd), werr
}

// limit marks the watcher incomplete and logs it once.
func (w *NewCgroups) limit(why string, at host.Cgroup) {
	w.complete.Store(false)
	if w.loggedLimits {
		return
	}
	w.loggedLimits = true
	w.opts.Logger.Warn("new cgroups: no more inotify watches; cgroups beneath the unwatched ones are found by the periodic scan only",
		"why", why, "first_unwatched", string(at), "watches", w.watches.Load())
}

// resync rebuilds the maps from a walk of the subtree after lost events or
// a rename, adding the missing watches, and owes the receiver a Rescan.
func (w *NewCgroups) resync() {
	w.rescan = true
	cgs, err := layout.Walk(w.h, w.under)
	if err != nil {
		return // the subtree itself is gone; its IN_DELETE_SELF follows
	}
	paths := make(map[int32]host.Cgroup, len(cgs))
	wds := make(map[host.Cgroup]int32, len(cgs))
	for _, cg := range cgs {
		if len(paths) >= w.opts.MaxWatches {
			w.limit(fmt.Sprintf("MaxWatches (%d) reached", w.opts.MaxWatches), cg)
			break
		}
		wd, err := w.addWatch(w.h.Dir(cg))
		if err != nil {
			if !ctlfile.IsVanished(err) {
				w.limit(err.Error(), cg)
			}
			continue
		}
		paths[wd], wds[cg] = cg, wd
	}
	for wd := range w.paths {
		if _, ok := paths[wd]; !ok {
			_ = w.raw.Control(func(fd uintptr) { _, _ = unix.InotifyRmWatch(int(fd), uint32(wd)) })
		}
	}
	w.paths, w.wds = paths, wds
	w.watches.Store(int64(len(paths)))
}

// send reports ev without blocking: when the queue is full it is dropped
// and a Rescan owed.
func (w *NewCgroups) send(ev CgroupEvent) {
	if w.rescan {
		w.flushRescan()
	}
	select {
	case w.out <- ev:
	default:
		w.dropped.Add(1)
		w.rescan = true
	}
}

// flushRescan sends the Rescan owed, if there is room.
func (w *NewCgroups) flushRescan() {
	select {
	case w.out <- CgroupEvent{Cgroup: w.under, Rescan: true}:
		w.rescan = false
	default:
	}
}
