package cgroupfs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/act"
	"github.com/memcgd/memcgd/cgroupfs/dirtytrack"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// fastPath is FS's share of the eBPF dirty tracker (docs/lab/2026-11-30-fastpath.md): the
// cgroup path <-> id map, which ids the tracker counts for, and the one
// goroutine that reads the tracker's events and hands wake-ups to the
// Watcher and mkdir/rmdir to the cgroup notifier. With a nil tracker it
// only keeps the freezer directories FS made (FS.Freeze).
//
// Locks: fastPath.mu is held over its maps and the tracker's calls (the
// Tracker's mu is a leaf), never while calling a sink (the wake sink takes
// the Watcher's mu, which its loop holds through a usage-poll pass).
type fastPath struct {
	tr     *dirtytrack.Tracker // nil: the fallback
	reason string              // why the fallback
	mem    layout.Hierarchy
	under  host.Cgroup
	log    *slog.Logger

	mu sync.Mutex // guards everything below
	// ids and cgs map the cgroups FS has resolved to their kernfs ids,
	// and back; counted are the ids the tracker counts for.
	ids     map[host.Cgroup]uint64
	cgs     map[uint64]host.Cgroup
	counted map[uint64]bool
	// wake hands a woken cgroup to the Watcher's report path; nil while
	// no TrackedWatcher runs.
	wake func(host.Cgroup)
	// notify hands a cgroup event to the notifier; nil while none runs.
	notify func(host.CgroupEvent)
	// dirtierFns are the pace episodes' requests to hear of a cgroup's
	// next new dirtying thread (NotifyDirtier), by id; each is called
	// once.
	dirtierFns map[uint64]*dirtierRequest
	// anchors are, by id, memory.stat's dirty+writeback less the
	// tracker's level count at an observation (anchorLevel): the count
	// moves from 0 at the watch, memory.stat from wherever it was.
	anchors map[uint64]int64
	// made are the freezer directories EnsureFreezer created, per memory
	// cgroup; unavailable the reason its last freeze could not work.
	made        map[host.Cgroup][]string
	unavailable map[host.Cgroup]string
	// listed is when FS.WriteOut last listed each cgroup's files in
	// /proc (listDue).
	listed map[host.Cgroup]time.Time
}

func newFastPath(tr *dirtytrack.Tracker, reason string, mem layout.Hierarchy, under host.Cgroup, log *slog.Logger) *fastPath {
	if log == nil {
		log = slog.Default()
	}
	if tr == nil && reason == "" {
		reason = "no eBPF dirty tracker given"
	}
	f := &fastPath{
		tr: tr, reason: reason, mem: mem, under: under, log: log,
		ids: make(map[host.Cgroup]uint64), cgs: make(map[uint64]host.Cgroup), counted: make(map[uint64]bool),
		dirtierFns: make(map[uint64]*dirtierRequest), anchors: make(map[uint64]int64),
		made: make(map[host.Cgroup][]string), unavailable: make(map[host.Cgroup]string),
	}
	if tr != nil {
		tr.Handle(f.handle)
	}
	return f
}

// path returns the dirty-tracking path in force.
func (f *fastPath) path() host.DirtyPath {
	if f.tr != nil {
		return host.DirtyPath{Tracker: true, Levels: f.tr.CountsLevels()}
	}
	return host.DirtyPath{Reason: f.reason}
}

// id returns cg's kernfs id, resolving it on first use. A missing
// directory wraps host.ErrVanished.
func (f *fastPath) id(cg host.Cgroup) (uint64, error) {
	f.mu.Lock()
	id, ok := f.ids[cg]
	f.mu.Unlock()
	if ok {
		return id, nil
	}
	dir := f.mem.Dir(cg)
	if dir == "" {
		return 0, fmt.Errorf("cgroup %s: outside the mounted memory hierarchy %s", cg, f.mem.Mount)
	}
	id, err := dirtytrack.CgroupID(dir)
	if err != nil {
		if _, ok := layout.ExistingDir(dir); !ok {
			return 0, fmt.Errorf("%w: %w", host.ErrVanished, err)
		}
		return 0, err
	}
	f.mu.Lock()
	f.ids[cg], f.cgs[id] = id, cg
	f.mu.Unlock()
	return id, nil
}

// count makes the tracker count for cg, if it does not yet, and returns
// cg's id. It arms no wake-up: a Watch already armed is kept.
func (f *fastPath) count(cg host.Cgroup) (uint64, error) {
	id, err := f.id(cg)
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.counted[id] {
		return id, nil
	}
	if err := f.tr.Watch(id, dirtytrack.Never); err != nil {
		return 0, fmt.Errorf("track %s: %w", cg, err)
	}
	f.counted[id] = true
	return id, nil
}

// counts returns the tracker's counters for cg, counting from now if it
// did not yet.
func (f *fastPath) counts(cg host.Cgroup) (host.DirtyCounts, error) {
	id, err := f.count(cg)
	if err != nil {
		return host.DirtyCounts{}, fmt.Errorf("dirtied %s: %w", cg, err)
	}
	n, err := f.tr.Counts(id)
	if errors.Is(err, dirtytrack.ErrNotWatched) {
		// Its rmdir unwatched it between count and now.
		return host.DirtyCounts{}, fmt.Errorf("dirtied %s: %w: %w", cg, host.ErrVanished, err)
	}
	if err != nil {
		return host.DirtyCounts{}, fmt.Errorf("dirtied %s: %w", cg, err)
	}
	return host.DirtyCounts{Dirtied: n.Dirtied, HasCancelled: n.HasCancelled, Cancelled: n.Cancelled}, nil
}

// A dirtierRequest is one NotifyDirtier call waiting for its report.
type dirtierRequest struct{ fn func() }

var _ act.DirtierSource = (*fastPath)(nil)

// Dirtiers lists the threads of cg's own tasks that the tracker saw
// dirty cg's pages within the last within (act.DirtierSource). The
// tracker refreshes a thread's time at least every 16 folios it dirties:
// within a second, a writer of 2 MiB folios at 32 MiB/s or more is
// always listed.
func (f *fastPath) Dirtiers(cg host.Cgroup, within time.Duration) ([]int, error) {
	id, err := f.count(cg)
	if err != nil {
		return nil, fmt.Errorf("dirtiers of %s: %w", cg, err)
	}
	ds, err := f.tr.Dirtiers(id)
	if errors.Is(err, dirtytrack.ErrNotWatched) {
		return nil, fmt.Errorf("dirtiers of %s: %w: %w", cg, host.ErrVanished, err)
	}
	if err != nil {
		return nil, fmt.Errorf("dirtiers of %s: %w", cg, err)
	}
	var out []int
	for _, d := range ds {
		if d.Age <= within {
			out = append(out, d.TID)
		}
	}
	return out, nil
}

// NotifyDirtier arms the tracker's report of cg's next new dirtying
// thread and calls fn, once, on the tracker's wake-up goroutine when it
// comes (act.DirtierSource). A later call for cg replaces fn.
func (f *fastPath) NotifyDirtier(cg host.Cgroup, fn func()) (stop func(), err error) {
	id, err := f.count(cg)
	if err != nil {
		return nil, fmt.Errorf("notify of dirtiers of %s: %w", cg, err)
	}
	req := &dirtierRequest{fn: fn}
	stop = func() {
		f.mu.Lock()
		if f.dirtierFns[id] == req {
			delete(f.dirtierFns, id)
		}
		f.mu.Unlock()
	}
	f.mu.Lock()
	f.dirtierFns[id] = req
	f.mu.Unlock()
	if err := f.tr.ArmDirtier(id); err != nil {
		stop()
		return nil, fmt.Errorf("notify of dirtiers of %s: %w", cg, err)
	}
	return stop, nil
}

// arm sets cg's wake-up at the absolute counter value above (0 and
// memcg.NoLimit: none).
func (f *fastPath) arm(cg host.Cgroup, above uint64) error {
	if above == 0 || above == memcg.NoLimit {
		above = dirtytrack.Never
	}
	id, err := f.id(cg)
	if err != nil {
		return fmt.Errorf("watch %s: %w", cg, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if above == dirtytrack.Never && !f.counted[id] {
		return nil
	}
	if err := f.tr.Watch(id, above); err != nil {
		return fmt.Errorf("watch %s: %w", cg, err)
	}
	f.counted[id] = true
	return nil
}

// forget drops what fastPath holds for cg: its id, the tracker's count,
// and the freezer directories EnsureFreezer made for it (RemoveFreezer).
// Only FS.Forget calls it: the driver decides when a cgroup's state goes.
func (f *fastPath) forget(cg host.Cgroup) {
	f.mu.Lock()
	if id, ok := f.ids[cg]; ok {
		delete(f.ids, cg)
		if f.cgs[id] == cg {
			delete(f.cgs, id)
		}
		if f.counted[id] {
			delete(f.counted, id)
			if err := f.tr.Unwatch(id); err != nil {
				f.log.Warn("dirty tracker: unwatch removed cgroup", "cgroup", cg, "err", err)
			}
		}
		delete(f.dirtierFns, id)
		delete(f.anchors, id)
	}
	made := f.made[cg]
	delete(f.made, cg)
	delete(f.unavailable, cg)
	delete(f.listed, cg)
	f.mu.Unlock()
	if len(made) > 0 {
		if err := act.RemoveFreezer(made); err != nil {
			f.log.Warn("remove the freezer cgroups made for a removed memory cgroup", "cgroup", cg, "err", err)
		}
	}
}

// removeMirrors removes the freezer directories EnsureFreezer made for
// every cgroup (RemoveFreezer), deepest first across all of them, so that
// a parent made for two cgroups goes once both children have. A directory
// still in use stays, and is forgotten: FS makes it again if need be.
func (f *fastPath) removeMirrors() {
	f.mu.Lock()
	var made []string
	for cg, dirs := range f.made {
		made = append(made, dirs...)
		delete(f.made, cg)
	}
	f.mu.Unlock()
	if len(made) == 0 {
		return
	}
	// RemoveFreezer takes the list outermost first: by depth, then path.
	slices.SortFunc(made, func(a, b string) int {
		return cmp.Or(cmp.Compare(strings.Count(a, "/"), strings.Count(b, "/")), strings.Compare(a, b))
	})
	made = slices.Compact(made)
	if err := act.RemoveFreezer(made); err != nil {
		f.log.Warn("remove the freezer cgroups made for the throttle", "err", err)
	}
}

// ListEvery is how often a write-out with the tracker also writes out
// every file the tracker recorded for the cgroup and the files its tasks
// hold open (listDue).
const ListEvery = time.Second

// listDue reports whether a write-out of cg with the tracker should also
// take every file the tracker recorded for cg and list the files cg's
// tasks hold open in /proc, and if so takes now as its time. Both cost
// with what others do: the tracker's record is one map of every memcg's
// files, scanned whole (26 ms at 65,536 records, BenchmarkInodes), and the
// listing reads every task's fds, fdinfo, maps and mountinfo (8 % of a core
// for a writer throttled at 900 MiB/s, whose write-outs come hundreds of
// times a second). What cg's subtree dirtied since it was first counted
// is in the tracker's ring of its recent files (dirtytrack's Recent) but
// for what the ring dropped: older files, and those of the LRU it
// evicted. So both run at cg's first write-out and then at most once
// every ListEvery.
func (f *fastPath) listDue(cg host.Cgroup, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if last, ok := f.listed[cg]; ok && now.Sub(last) < ListEvery && !now.Before(last) {
		return false
	}
	if f.listed == nil {
		f.listed = make(map[host.Cgroup]time.Time)
	}
	f.listed[cg] = now
	return true
}

// setWake and setNotify install or remove (nil) the consumers of the
// tracker's events.
func (f *fastPath) setWake(fn func(host.Cgroup)) {
	f.mu.Lock()
	f.wake = fn
	f.mu.Unlock()
}

func (f *fastPath) setNotify(fn func(host.CgroupEvent)) {
	f.mu.Lock()
	f.notify = fn
	f.mu.Unlock()
}

// handle hands a wake-up to the Watcher, and a mkdir or rmdir beneath the
// managed subtree to the notifier. A removed cgroup's id and freezer
// directories stay until the driver forgets it (FS.Forget); only the
// tracker's count, which the tracker dropped itself, is marked gone. The
// tracker calls handle on its ring readers' goroutines (Tracker.Handle): a
// wake-up and a cgroup event may be handled at once.
func (f *fastPath) handle(ev dirtytrack.Event) {
	switch ev.Kind {
	case dirtytrack.Wake, dirtytrack.LevelCrossed:
		// The sink takes the Watcher's mu, which its loop holds through
		// a pass of the usage poll: not under f.mu, which Dirtied needs.
		f.mu.Lock()
		cg, ok := f.cgs[ev.ID]
		wake := f.wake
		f.mu.Unlock()
		if ok && wake != nil {
			wake(cg)
		}
		if ok && f.log.Enabled(context.Background(), slog.LevelDebug) {
			// How long the wake-up took from the kernel to the
			// Watcher's queue, the first part of the reaction: out of
			// the ring buffer (read), then into the queue (sink), on
			// the same goroutine (Tracker.Handle).
			now := dirtytrack.MonotonicNow()
			f.log.Debug("tracker wake", "cgroup", cg, "kind", ev.Kind, "dirtied", ev.Dirtied, "level", ev.DirtyLevel,
				"lag", now-ev.Time, "read", ev.Read-ev.Time, "sink", now-ev.Read)
		}
	case dirtytrack.NewDirtier:
		f.mu.Lock()
		req := f.dirtierFns[ev.ID]
		delete(f.dirtierFns, ev.ID)
		f.mu.Unlock()
		if req != nil {
			req.fn()
		}
	case dirtytrack.Mkdir, dirtytrack.Rmdir:
		cg := host.Cgroup(ev.Path)
		if !layout.BeneathOrAt(f.under, cg) || f.mem.Dir(cg) == "" {
			return
		}
		removed := ev.Kind == dirtytrack.Rmdir
		if removed {
			// The tracker has unwatched the id already: Forget must
			// not unwatch it again.
			f.mu.Lock()
			delete(f.counted, ev.ID)
			f.mu.Unlock()
		}
		f.mu.Lock()
		notify := f.notify
		f.mu.Unlock()
		if notify != nil {
			notify(host.CgroupEvent{Cgroup: cg, Removed: removed})
		}
	}
}

// froze records the outcome of a freeze of cg: the freezer directories
// made, and why it cannot be throttled, if it cannot.
func (f *fastPath) froze(cg host.Cgroup, made []string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(made) > 0 {
		f.made[cg] = append(f.made[cg], made...)
	}
	var tu *act.ThrottleUnavailable
	switch {
	case errors.As(err, &tu):
		f.unavailable[cg] = tu.Reason
	case err == nil:
		delete(f.unavailable, cg)
	}
}

// throttleUnavailable returns the reason recorded by froze.
func (f *fastPath) throttleUnavailable(cg host.Cgroup) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.unavailable[cg]
}
