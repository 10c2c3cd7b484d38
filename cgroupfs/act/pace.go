package act

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/format"
	"github.com/memcgd/memcgd/cgroupfs/journal"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
	"golang.org/x/sys/unix"
)

// Pacing a memory cgroup's dirtying threads by CPU bandwidth (host.Pacer).
// The threads alone go into a pace group, a cgroup of the cpu controller
// named journal.PaceGroupName beneath the cpu cgroup they are in, with a
// CFS quota per period; the cgroup's other tasks, and the threads' memory
// cgroup, stay as they are. Because the pace group is a child of the
// threads' own cpu cgroup, the tenant's own CPU limit still holds over
// it, and memcgd never writes the tenant's: it can only lower what the
// threads get (kernel/sched/fair.c, tg_cfs_schedulable_down: a child's
// quota is bounded by its parent's).
//
//   - cgroup v1 (the cpu controller on a v1 hierarchy): each hierarchy takes
//     thread ids in tasks, so the threads move alone.
//   - cgroup v2: the pace group is a threaded child of the threads' leaf,
//     which thereby becomes a threaded domain: memory is still charged to
//     the leaf (all its processes belong to the threaded domain), and the
//     cpu controller is enabled in the leaf's cgroup.subtree_control for
//     the child (Documentation/admin-guide/cgroup-v2.rst, "Threads"). A
//     leaf that cannot become a threaded domain (it has children, or
//     domain controllers enabled below it) is not paced.
//
// Every pace group, and on v2 the +cpu, is journalled before it is made,
// and End (or the next start's Recover) moves the threads back to the
// cgroup they came from and removes the group. The +cpu is taken back
// unless the tenant made cgroups beneath the leaf meanwhile, which have
// the controller's files by then.

// ErrNotPaceable reports a cgroup whose dirtying threads the hierarchy
// does not let memcgd pace: it wraps errors.ErrUnsupported, so that the
// freezer throttles the cgroup instead.
var ErrNotPaceable = fmt.Errorf("cannot pace: %w", errors.ErrUnsupported)

// Pacer begins pacing episodes. Its zero value is not usable: set Layout,
// ProcRoot and Journal.
type Pacer struct {
	Layout   layout.Layout
	ProcRoot string
	Journal  *journal.Journal
	// Under is the subtree, a hierarchy path (the config's manage.under),
	// beneath which the pacer may make pace groups in the cpu hierarchy:
	// a thread whose cpu cgroup lies outside it is not paced.
	Under host.Cgroup
	// Dirtiers, if set, names the threads of a memory cgroup that dirty
	// its pages, and tells an episode of one that begins to (the eBPF
	// tracker's, which runs in the dirtying thread's context): a new
	// writer is then paced within milliseconds, not at the next change of
	// the pace. Without it the pacer compares the write_bytes of each
	// thread of the cgroup (/proc/TID/task/TID/io), which counts the bytes
	// a task dirties, buffered writes and stores to shared mappings alike
	// (task_io_account_write, folio_account_dirtied in
	// mm/page-writeback.c).
	Dirtiers DirtierSource

	mu      sync.Mutex
	samples map[host.Cgroup]threadSample // the last write_bytes per thread, by memory cgroup
	// busy are the groups of ended episodes that an exited, unreaped
	// thread still kept populated (journal.ReleasePaceGroup): removed,
	// and their records undone, at a later call.
	busy []busyGroup
}

// A DirtierSource names the threads of memory cgroups that dirty their
// pages (Pacer.Dirtiers).
type DirtierSource interface {
	// Dirtiers lists the threads of cg's own tasks that dirtied its
	// pages within the last within.
	Dirtiers(cg host.Cgroup, within time.Duration) ([]int, error)
	// NotifyDirtier calls fn once, on a goroutine of the source's, when a
	// thread that Dirtiers did not list begins dirtying cg's pages; it is
	// armed again by another call. fn must return soon. Stop drops the
	// request.
	NotifyDirtier(cg host.Cgroup, fn func()) (stop func(), err error)
}

// dirtierWindow is how lately a thread must have dirtied to be paced (a
// DirtierSource's answer), and escapeWindow to count as dirtying now
// (Paced.Unpaced): a thread stops counting as an escape as soon as it
// stops dirtying, or is taken.
const (
	dirtierWindow = time.Second
	escapeWindow  = 50 * time.Millisecond
)

// followGap is the least time between two adoptions of new dirtiers of an
// episode (Paced.follow): a tenant starting writer threads by the
// thousand makes the pacer move them in batches, not one at a time,
// each move waiting for an RCU grace period under the episode's lock.
const followGap = 5 * time.Millisecond

// busyGroup is a pace group left to remove.
type busyGroup struct {
	g    *paceGroup
	file string
}

// threadSample is the write_bytes of a cgroup's threads, when read.
type threadSample struct {
	at    time.Time
	bytes map[int]uint64
}

// firstSampleGap and laterSampleGap are the waits between the samples of
// the threads' write_bytes when the pacer has no recent one, until a
// thread is seen to grow. The episode's first move waits for them while
// the writer runs free, so the first is short: a writer at 1 GB/s
// dirties 1 MB in it. A thread that dirtied nothing in it (asleep in
// balance_dirty_pages, or between two writes) is given 4 ms more; one
// that dirties later still is found at the next search (the next change
// of the pace), against the sample this one leaves.
const (
	firstSampleGap = time.Millisecond
	laterSampleGap = 4 * time.Millisecond
)

// sampleMaxAge is the oldest a sample may be to tell the dirtiers by.
const sampleMaxAge = 2 * time.Second

// How often an episode's bookkeeping is read again, at most: the threads
// still in its groups (liveRescan, at CPU; on v1 adopt takes those listed
// as paced without reading their /proc/TID/cgroup), and the tenant's own
// CPU limit each group is held under (parentRescan, at a write of the
// pace, and at once when a write is refused). CPU is read at every step
// and a pace written up to hundreds of times a second; a CPU limit the
// tenant lowers bounds the threads whatever memcgd writes
// (tg_cfs_schedulable_down, kernel/sched/core.c).
const (
	liveRescan   = 100 * time.Millisecond
	parentRescan = time.Second
)

// maxOpenSched is how many paced threads' schedstat files an episode
// keeps open (Paced.threadCPU): a tenant with thousands of dirtying
// threads gets no more of the daemon's fds.
const maxOpenSched = 64

// Forget drops what the pacer keeps of cg.
func (p *Pacer) Forget(cg host.Cgroup) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.samples, cg)
	p.removeBusy()
}

// removeBusy removes the busy groups that have emptied since and undoes
// their records. p.mu is held.
func (p *Pacer) removeBusy() {
	p.busy = slices.DeleteFunc(p.busy, func(b busyGroup) bool {
		if _, err := journal.ReleasePaceGroup(b.g.dir, b.file, 0); err != nil {
			return false // still busy, or failing: the journal's undo at exit has it
		}
		_ = p.undoAll(b.g)
		return true
	})
}

// takeBusy takes the busy group at dir off the list, if there is one,
// and returns its journal records, oldest first: an episode that makes
// its group there takes it over, records and all, as its own. The
// journal holds one pending record per file, and left on the list, the
// group's later removal as the ended episode's would move the new
// episode's threads out.
func (p *Pacer) takeBusy(dir string) []uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var records []uint64
	p.busy = slices.DeleteFunc(p.busy, func(b busyGroup) bool {
		if b.g.dir != dir {
			return false
		}
		records = append(records, b.g.records...)
		return true
	})
	return records
}

// Pace begins an episode of cg's dirtying threads at quota per period.
// Threads that begin dirtying later are paced at the episode's next Set.
// The episode ends when ctx ends, if End was not called before.
func (p *Pacer) Pace(ctx context.Context, cg host.Cgroup, quota, period time.Duration) (host.Paced, error) {
	if err := checkPace(quota, period); err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.removeBusy()
	p.mu.Unlock()
	v2 := p.Layout.Memory.Version == layout.V2 && p.Layout.CPU == nil
	if !v2 && p.Layout.CPU == nil {
		return nil, fmt.Errorf("pace %s: no cpu controller on a v1 hierarchy, nor memory on v2: %w", cg, ErrNotPaceable)
	}
	e := &Paced{p: p, cg: cg, v2: v2, quota: quota, period: period, groups: map[string]*paceGroup{}}
	if p.Dirtiers != nil {
		e.notices, e.done = make(chan struct{}, 1), make(chan struct{})
	}
	tids, err := p.dirtiers(ctx, cg)
	if err != nil {
		return nil, fmt.Errorf("pace %s: %w", cg, err)
	}
	e.mu.Lock()
	err = e.adopt(ctx, tids)
	e.mu.Unlock()
	if err != nil {
		_ = e.End()
		return nil, fmt.Errorf("pace %s: %w", cg, err)
	}
	e.mu.Lock()
	e.stop = context.AfterFunc(ctx, func() { _ = e.End() })
	e.mu.Unlock()
	if e.done != nil {
		go e.follow()
	}
	return e, nil
}

// follow paces the cgroup's threads that begin dirtying during the
// episode as the Dirtiers source reports them, until End. The report is
// armed before the threads are listed, so that one beginning between the
// two is reported.
func (e *Paced) follow() {
	notice := func() {
		select {
		case e.notices <- struct{}{}:
		default:
		}
	}
	for {
		stop, err := e.p.Dirtiers.NotifyDirtier(e.cg, notice)
		if err != nil {
			return // the cgroup is gone: End follows
		}
		select {
		case <-e.done:
			stop()
			return
		case <-e.notices:
		}
		tids, err := e.p.Dirtiers.Dirtiers(e.cg, dirtierWindow)
		if err == nil {
			e.mu.Lock()
			if !e.ended {
				_ = e.adopt(context.Background(), tids) // Set reports what fails
			}
			e.mu.Unlock()
		}
		t := time.NewTimer(followGap)
		select {
		case <-e.done:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// checkPace checks a pace against what CFS takes (tg_set_cfs_bandwidth in
// kernel/sched/core.c: a period of 1 ms to 1 s, a quota of at least 1 ms,
// or none: 0 here).
func checkPace(quota, period time.Duration) error {
	if period < time.Millisecond || period > time.Second {
		return fmt.Errorf("pace period: invalid value %v: allowed 1ms to 1s", period)
	}
	if quota != 0 && quota < time.Millisecond {
		return fmt.Errorf("pace quota: invalid value %v: allowed at least 1ms, or 0 for no limit", quota)
	}
	return nil
}

// Paced is one pacing episode (host.Paced). It is safe for concurrent
// use: the end of the episode's context calls End from another goroutine.
type Paced struct {
	p  *Pacer
	cg host.Cgroup
	v2 bool

	mu            sync.Mutex // guards the fields below
	quota, period time.Duration
	groups        map[string]*paceGroup // by the directory of the cpu cgroup the threads came from
	ended         bool
	stop          func() bool
	// cpu is the CPU time the threads no longer in a group used while
	// paced (v1, which counts per thread); base is each paced thread's
	// when it was paced, last when CPU last read it; sched its
	// /proc/TID/task/TID/schedstat, open.
	cpu        time.Duration
	base, last map[int]time.Duration
	sched      map[int]*os.File
	// live, and liveAt, the threads in the groups when last listed (v1).
	liveAt time.Time
	live   []int
	// notices wakes follow, and done, closed by End, stops it; both nil
	// without a Dirtiers source. Set when the episode is made.
	notices chan struct{}
	done    chan struct{}

	// takenMu guards taken, the threads the episode has moved or is
	// moving into its groups: Unpaced reads it while a move, which
	// holds mu for an RCU grace period, is in flight.
	takenMu sync.Mutex
	taken   map[int]bool
	// checkedAt is when recheck last looked where the taken threads
	// are, and checkFrom where in their list it looks next. Guarded by
	// mu.
	checkedAt time.Time
	checkFrom int
}

var _ host.PacedEscapes = (*Paced)(nil)

// take marks tid taken, or not.
func (e *Paced) take(tid int, taken bool) {
	e.takenMu.Lock()
	defer e.takenMu.Unlock()
	if !taken {
		delete(e.taken, tid)
		return
	}
	if e.taken == nil {
		e.taken = map[int]bool{}
	}
	e.taken[tid] = true
}

// isTaken reports whether tid is taken.
func (e *Paced) isTaken(tid int) bool {
	e.takenMu.Lock()
	defer e.takenMu.Unlock()
	return e.taken[tid]
}

// Unpaced counts the cgroup's threads that dirtied its pages within
// escapeWindow and that the episode has not taken: ones it could not
// move, or not yet told of (host.PacedEscapes). Only a Dirtiers source
// can tell; without one ok is false.
func (e *Paced) Unpaced() (n int, ok bool) {
	if e.p.Dirtiers == nil {
		return 0, false
	}
	tids, err := e.p.Dirtiers.Dirtiers(e.cg, escapeWindow)
	if err != nil {
		return 0, false
	}
	escaped := e.recheck(tids)
	e.takenMu.Lock()
	for _, tid := range tids {
		if !e.taken[tid] {
			n++
		}
	}
	e.takenMu.Unlock()
	if escaped && e.notices != nil {
		select {
		case e.notices <- struct{}{}: // follow adopts them again
		default:
		}
	}
	return n, true
}

// recheck looks, at most every liveRescan, whether the threads among
// tids that the episode took are still in its groups, and takes back
// the word for those that are not: a tenant that may move its own
// threads (a delegated subtree) can move them out of a pace group, and
// they count as unpaced until adopted again. It reads at most
// maxOpenSched threads' cgroups a time, the next ones at the next
// recheck, and not under e.mu: a read of /proc/TID/cgroup waits for the
// kernel's cgroup_mutex (kernel/cgroup/cgroup.c, proc_cgroup_show),
// which a slow migration elsewhere holds, and End must not wait for it.
// It skips a recheck while a move holds e.mu. It reports whether a
// thread left.
func (e *Paced) recheck(tids []int) bool {
	if !e.mu.TryLock() {
		return false
	}
	if e.ended || time.Since(e.checkedAt) < liveRescan {
		e.mu.Unlock()
		return false
	}
	e.checkedAt = time.Now()
	dirs := make(map[string]bool, len(e.groups))
	for _, g := range e.groups {
		dirs[g.dir] = true
	}
	e.takenMu.Lock()
	var check []int
	for _, tid := range tids {
		if e.taken[tid] {
			check = append(check, tid)
		}
	}
	e.takenMu.Unlock()
	if len(check) > maxOpenSched {
		from := e.checkFrom % len(check)
		check = append(check[from:], check[:from]...)[:maxOpenSched]
		e.checkFrom += maxOpenSched
	}
	e.mu.Unlock()
	left := false
	for _, tid := range check {
		dir, err := e.cpuCgroup(tid)
		switch {
		case errors.Is(err, host.ErrVanished):
			continue // exited: nothing to pace
		case err == nil && dirs[dir]:
			continue
		}
		e.take(tid, false) // adopt then looks where it is again
		left = true
	}
	return left
}

var _ host.Paced = (*Paced)(nil)

// paceGroup is one pace group of an episode.
type paceGroup struct {
	dir    string // the pace group's directory
	parent string // the cpu cgroup the threads came from
	// fd holds dir (O_PATH), and every write to the group goes through
	// it: a tenant that may remove and make cgroups beside its threads
	// (a delegated subtree) and swaps an emptied group for one of its own
	// gets the writes failed, not its group's limit written or memcgd's
	// threads moved in. -1 once closed.
	fd      int
	records []uint64
	// period is the period last written to cpu.cfs_period_us (v1), 0
	// if unknown; share, shareOK and shareAt the tenant's own CPU limit
	// on parent (parentShare) and when it was read.
	period  time.Duration
	share   float64
	shareOK bool
	shareAt time.Time
}

// Set changes the episode's pace and paces the cgroup's threads that
// began dirtying since: a writer that has just started (the next dd of a
// script, a thread a runtime has just created) runs unpaced until it is
// found, so they are looked for at every change. The pace in force, set
// again, is only written again: the write refills the groups' quota (a
// stale period timer's remedy, policy.Decision.PaceRefill).
func (e *Paced) Set(quota, period time.Duration) error {
	if err := checkPace(quota, period); err != nil {
		return err
	}
	if e.refill(quota, period) {
		return nil
	}
	ctx := context.Background()
	tids, err := e.p.dirtiers(ctx, e.cg)
	if err != nil && !errors.Is(err, host.ErrVanished) {
		return fmt.Errorf("set pace of %s: %w", e.cg, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		return nil
	}
	e.quota, e.period = quota, period
	for parent, g := range e.groups {
		switch err := e.setLimit(g); {
		case errors.Is(err, host.ErrVanished):
			// Removed under the episode: its threads' cgroup is gone,
			// or its tenant took the group (paceGroup.fd).
			e.forgetGroup(parent, g)
		case err != nil:
			return fmt.Errorf("set pace of %s: %w", e.cg, err)
		}
	}
	// A thread the hierarchy lets no group hold is the freezer's once
	// the episode holds none.
	if err := e.adopt(ctx, tids); err != nil && (!errors.Is(err, ErrNotPaceable) || len(e.groups) == 0) {
		return fmt.Errorf("set pace of %s: %w", e.cg, err)
	}
	return nil
}

// CPU is the CPU time the paced threads have used within the episode:
// on v2 the pace groups' cpu.stat usage; on v1, which has no usage file
// in the cpu controller, the threads' own run time
// (/proc/TID/schedstat) since each was paced, a thread gone counting what
// it had used when last read.
func (e *Paced) CPU() (time.Duration, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.v2 {
		var total time.Duration
		for _, g := range e.groups {
			used, err := cpuStat(filepath.Join(g.dir, "cpu.stat"), "usage_usec", time.Microsecond)
			if err != nil {
				return 0, err
			}
			total += used
		}
		return total, nil
	}
	if time.Since(e.liveAt) >= liveRescan {
		var live []int
		for _, g := range e.groups {
			tids, err := journal.ReadTIDs(filepath.Join(g.dir, journal.FileTasksV1))
			if err != nil {
				return 0, err
			}
			live = append(live, tids...)
		}
		e.live, e.liveAt = live, time.Now()
	}
	total := e.cpu
	for tid, b := range e.base {
		var run time.Duration
		live := slices.Contains(e.live, tid)
		if live {
			var err error
			run, err = e.threadCPU(tid)
			live = err == nil
		}
		if !live {
			// Gone, or left the group: what it used while paced stays
			// counted.
			e.cpu += e.last[tid] - b
			total += e.last[tid] - b
			e.forgetThread(tid)
			continue
		}
		if run >= e.last[tid] {
			e.last[tid] = run
		}
		total += e.last[tid] - b
	}
	return total, nil
}

// threadCPU is the time tid has run, from its schedstat file, kept open
// between reads for the first maxOpenSched threads: the fd names the
// thread, not its number, which a new thread may take once it is reaped.
// Caller holds e.mu.
func (e *Paced) threadCPU(tid int) (time.Duration, error) {
	f, ok := e.sched[tid]
	if !ok {
		var err error
		f, err = os.Open(threadFile(e.p.ProcRoot, tid, "schedstat"))
		if err != nil {
			return 0, err
		}
		if len(e.sched) < maxOpenSched {
			if e.sched == nil {
				e.sched = map[int]*os.File{}
			}
			e.sched[tid] = f
		} else {
			defer f.Close()
		}
	}
	var buf [128]byte
	n, err := f.ReadAt(buf[:], 0)
	if n == 0 && err != nil {
		return 0, fmt.Errorf("read /proc/%d/schedstat: %w", tid, err)
	}
	return parseSchedStat(tid, buf[:n])
}

// forgetThread drops what the episode keeps of tid. Caller holds e.mu.
func (e *Paced) forgetThread(tid int) {
	if f, ok := e.sched[tid]; ok {
		f.Close()
		delete(e.sched, tid)
	}
	delete(e.base, tid)
	delete(e.last, tid)
}

// End releases the threads and removes the pace groups. Calls after the
// first do nothing.
func (e *Paced) End() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		return nil
	}
	e.ended = true
	if e.stop != nil {
		e.stop() // returns at once, even from within the AfterFunc
	}
	if e.done != nil {
		close(e.done)
	}
	var errs []error
	for _, g := range e.groups {
		switch released, err := e.release(g); {
		case !released:
			continue
		case err != nil && !errors.Is(err, journal.ErrNotMemcgds):
			errs = append(errs, err)
			continue
		}
		// A group its tenant took is left to it: the records' undo
		// says so.
		if err := e.p.undoAll(g); err != nil {
			errs = append(errs, err)
		}
	}
	e.groups = nil
	for tid := range e.sched {
		e.forgetThread(tid)
	}
	if len(errs) > 0 {
		return fmt.Errorf("end pacing of %s: %w", e.cg, errors.Join(errs...))
	}
	return nil
}

// threadsFile is the file a pace group lists its threads in.
func (e *Paced) threadsFile() string {
	if e.v2 {
		return journal.FileThreads
	}
	return journal.FileTasksV1
}

// adopt puts the threads tids into the episode's pace groups, making a
// group where a thread's cpu cgroup has none yet. A thread in no cgroup
// the pacer may act on (outside Under, in another hierarchy's way) is
// left alone; if no thread at all can be paced and the hierarchy is why,
// it returns ErrNotPaceable. Caller holds e.mu.
func (e *Paced) adopt(ctx context.Context, tids []int) error {
	var refused error
	for _, tid := range tids {
		if !e.v2 && slices.Contains(e.live, tid) && e.isTaken(tid) {
			// In a group when last listed (v1: at most liveRescan ago,
			// at CPU) and not seen out of it since (recheck): one moved
			// out since is found at the next listing.
			continue
		}
		parent, err := e.cpuCgroup(tid)
		switch {
		case errors.Is(err, host.ErrVanished), errors.Is(err, errElsewhere):
			continue
		case err != nil:
			refused = err
			continue
		case filepath.Base(parent) == journal.PaceGroupName:
			if _, ok := e.groups[filepath.Dir(parent)]; ok {
				continue // paced already
			}
			// A group of that name not the episode's: another
			// episode's (nested cgroups) or the tenant's own. A thread
			// in the tenant's is refused, so that the freezer, not a
			// limit the tenant writes, throttles it.
			if err := journal.OwnedDir(parent); err != nil {
				refused = fmt.Errorf("thread %d: %w: %w", tid, err, ErrNotPaceable)
			}
			continue
		}
		g, ok := e.groups[parent]
		if !ok {
			g, err = e.makeGroup(ctx, parent)
			if err != nil {
				refused = err
				continue
			}
			e.groups[parent] = g
		}
		if !e.v2 {
			if run, err := e.threadCPU(tid); err == nil {
				if e.base == nil {
					e.base, e.last = map[int]time.Duration{}, map[int]time.Duration{}
				}
				e.base[tid], e.last[tid] = run, run
			}
		}
		e.take(tid, true) // taken while it moves: Unpaced does not count it
		switch err := ctlfile.WriteAt(g.fd, e.threadsFile(), strconv.Itoa(tid)); {
		case err == nil:
			e.live = append(e.live, tid)
		case errors.Is(err, unix.ESRCH):
		case errors.Is(err, host.ErrVanished):
			// The group was removed under the episode (the thread's own
			// cgroup gone, or the group taken by its tenant): forgotten,
			// its records undone, and made again at the next adoption.
			e.take(tid, false)
			e.forgetGroup(parent, g)
		default:
			e.take(tid, false)
			return fmt.Errorf("move thread %d into %s: %w", tid, g.dir, err)
		}
	}
	if len(e.groups) == 0 && refused != nil {
		return refused
	}
	return nil
}

// errElsewhere reports a thread whose memory cgroup is not the episode's,
// or beneath it.
var errElsewhere = errors.New("in another memory cgroup")

// cpuCgroup returns the directory of tid's cpu cgroup, refusing one the
// pacer may not make a group beneath, and a thread that is not the
// episode's cgroup's (errElsewhere): a thread id the source named may
// have been reused by a thread of another cgroup since it dirtied, which
// memcgd must not pace. The thread may still exit and its id be taken
// between this read and the move, which the kernel gives no way to tie
// together (cgroup.threads and tasks take ids): that needs the whole
// id space used within that window.
func (e *Paced) cpuCgroup(tid int) (string, error) {
	b, err := os.ReadFile(filepath.Join(e.p.ProcRoot, strconv.Itoa(tid), "cgroup"))
	if err != nil {
		return "", fmt.Errorf("thread %d: %w", tid, ctlfile.Vanished(err))
	}
	lines, err := format.ParseProcCgroup(b)
	if err != nil {
		return "", fmt.Errorf("thread %d: %w", tid, err)
	}
	h := e.p.Layout.CPU
	if e.v2 {
		h = &e.p.Layout.Memory
	}
	mine := false
	for _, l := range lines {
		if l.ID == 0 && l.Controllers == nil && e.v2 || !e.v2 && l.Has("memory") {
			_, mine = layout.Within(string(e.cg), l.Path)
		}
	}
	if !mine {
		return "", fmt.Errorf("thread %d: %w than %s", tid, errElsewhere, e.cg)
	}
	for _, l := range lines {
		if e.v2 && l.ID == 0 && l.Controllers == nil || !e.v2 && l.Has("cpu") {
			cg := host.Cgroup(l.Path)
			if _, ok := layout.Within(string(e.p.Under), string(cg)); !ok || strings.HasPrefix(l.Path, "/..") {
				return "", fmt.Errorf("thread %d: its cpu cgroup %s is outside manage.under %s: %w", tid, cg, e.p.Under, ErrNotPaceable)
			}
			return h.Dir(cg), nil
		}
	}
	return "", fmt.Errorf("thread %d: no cpu cgroup in /proc/%d/cgroup: %w", tid, tid, ErrNotPaceable)
}

// makeGroup makes the pace group beneath parent, journalled first, with
// the episode's limit. On v2 the child is made threaded first, which
// makes the leaf a threaded domain, and only then may the cpu controller
// be enabled in the leaf's subtree_control: a domain cgroup with tasks
// refuses it (kernel/cgroup/cgroup.c, cgroup_vet_subtree_control_enable).
func (e *Paced) makeGroup(ctx context.Context, parent string) (*paceGroup, error) {
	g := &paceGroup{dir: filepath.Join(parent, journal.PaceGroupName), parent: parent, fd: -1}
	fail := func(err error) (*paceGroup, error) {
		e.dropGroup(g)
		return nil, err
	}
	// A group an ended episode left busy is still journalled: its record
	// is taken over, not made again.
	g.records = e.p.takeBusy(g.dir)
	if len(g.records) == 0 {
		c, err := journal.PaceGroupChange(parent, e.threadsFile())
		if err != nil {
			return nil, err
		}
		id, err := e.p.Journal.Record(c)
		if err != nil {
			return nil, err
		}
		g.records = append(g.records, id)
	}
	// An existing group is an ended episode's that a thread still kept
	// (Pacer.busy), or one its tenant made of that name.
	if err := unix.Mkdir(g.dir, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		_ = e.p.undoAll(g)
		return nil, fmt.Errorf("make pace group %s: %w", g.dir, err)
	}
	fd, err := unix.Open(g.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = e.p.undoAll(g)
		return nil, fmt.Errorf("open pace group %s: %w", g.dir, ctlfile.Vanished(err))
	}
	g.fd = fd
	if err := journal.OwnedPaceGroup(g.fd, g.dir); err != nil {
		// The tenant's: neither its threads nor the group are memcgd's
		// to move or remove, so the record is dropped, not undone.
		e.closeGroup(g)
		for _, id := range g.records {
			_ = e.p.Journal.Done(id)
		}
		return nil, fmt.Errorf("make pace group: %w: %w", err, ErrNotPaceable)
	}
	if e.v2 {
		if err := ctlfile.WriteAt(g.fd, "cgroup.type", "threaded"); err != nil {
			return fail(fmt.Errorf("make pace group %s threaded (the leaf cannot be a threaded domain): %v: %w", g.dir, err, ErrNotPaceable))
		}
		if err := e.p.enableCPU(ctx, g, parent); err != nil {
			return fail(err)
		}
	}
	if err := e.setLimit(g); err != nil {
		return fail(err)
	}
	return g, nil
}

// forgetGroup drops g, the episode's group for the threads of parent,
// which was removed under it, and the threads it held as last listed:
// they are looked for again where they are. Caller holds e.mu.
func (e *Paced) forgetGroup(parent string, g *paceGroup) {
	e.dropGroup(g)
	delete(e.groups, parent)
	e.live, e.liveAt = nil, time.Time{}
}

// dropGroup releases g, a group that failed to be made or vanished, and
// undoes its records.
func (e *Paced) dropGroup(g *paceGroup) {
	if released, _ := e.release(g); released {
		_ = e.p.undoAll(g)
	}
}

// release closes g, moves its threads back and removes it
// (journal.ReleasePaceGroup), and returns its error. A group that an
// exiting thread still keeps populated goes on the pacer's busy list
// with its records, to be removed or taken over later: released is then
// false.
func (e *Paced) release(g *paceGroup) (released bool, err error) {
	e.closeGroup(g)
	_, err = journal.ReleasePaceGroup(g.dir, e.threadsFile(), journal.ReleaseWait)
	if errors.Is(err, unix.EBUSY) {
		e.p.mu.Lock()
		e.p.busy = append(e.p.busy, busyGroup{g: g, file: e.threadsFile()})
		e.p.mu.Unlock()
		return false, nil
	}
	return true, err
}

// closeGroup closes g's descriptor.
func (e *Paced) closeGroup(g *paceGroup) {
	if g.fd >= 0 {
		unix.Close(g.fd)
		g.fd = -1
	}
}

// undoAll undoes g's journal records, newest first (on v2 the +cpu
// record, made after the group's, before it), and drops them.
func (p *Pacer) undoAll(g *paceGroup) error {
	var errs []error
	for _, id := range slices.Backward(g.records) {
		if err := p.undo(id); err != nil {
			errs = append(errs, err)
		}
	}
	g.records = nil
	return errors.Join(errs...)
}

// refill writes the pace in force again, if it is quota per period, and
// reports whether it was; a group it cannot write is left to a full Set.
func (e *Paced) refill(quota, period time.Duration) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended || quota != e.quota || period != e.period || len(e.groups) == 0 {
		return false
	}
	for _, g := range e.groups {
		if err := e.setLimit(g); err != nil {
			return false
		}
	}
	return true
}

// setLimit writes the episode's pace to g; the quota is shared between
// the episode's groups. A write the kernel refuses is tried once more
// with the tenant's CPU limit read again.
func (e *Paced) setLimit(g *paceGroup) error {
	err := e.writeLimit(g)
	if errors.Is(err, unix.EINVAL) {
		g.shareAt, g.period = time.Time{}, 0
		err = e.writeLimit(g)
	}
	return err
}

// writeLimit writes the episode's pace to g. On v1 the period is written
// only when it changed: a write of either file sets the whole bandwidth
// and refills the quota (kernel/sched/core.c, tg_set_cfs_bandwidth).
func (e *Paced) writeLimit(g *paceGroup) error {
	us := func(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }
	quota := "max" // v2's no limit; v1's is -1
	if e.quota > 0 {
		q := max(e.quota/time.Duration(max(len(e.groups), 1)), time.Millisecond)
		// Not above the tenant's own share: v1 refuses a child's
		// bandwidth above its parent's (tg_cfs_schedulable_down), and
		// the parent's holds anyway.
		if time.Since(g.shareAt) >= parentRescan {
			g.share, g.shareOK = e.parentShare(g.parent)
			g.shareAt = time.Now()
		}
		if g.shareOK {
			q = max(min(q, time.Duration(g.share*float64(e.period))), time.Millisecond)
		}
		quota = us(q)
	}
	if e.v2 {
		return ctlfile.WriteAt(g.fd, "cpu.max", quota+" "+us(e.period))
	}
	if quota == "max" {
		quota = "-1"
	}
	// Period first: a quota written against the old period could be
	// refused where the new pair is not (tg_cfs_schedulable_down).
	if g.period != e.period {
		g.period = 0
		if err := ctlfile.WriteAt(g.fd, "cpu.cfs_period_us", us(e.period)); err != nil {
			return err
		}
		g.period = e.period
	}
	return ctlfile.WriteAt(g.fd, "cpu.cfs_quota_us", quota)
}

// parentShare is the CPU share the tenant's own limit on parent gives, if
// it has one.
func (e *Paced) parentShare(parent string) (float64, bool) {
	if e.v2 {
		s, err := ctlfile.Read(filepath.Join(parent, "cpu.max"))
		if err != nil {
			return 0, false
		}
		f := strings.Fields(s)
		if len(f) != 2 || f[0] == "max" {
			return 0, false
		}
		q, err1 := strconv.ParseFloat(f[0], 64)
		p, err2 := strconv.ParseFloat(f[1], 64)
		if err1 != nil || err2 != nil || p <= 0 {
			return 0, false
		}
		return q / p, true
	}
	qs, err1 := ctlfile.Read(filepath.Join(parent, "cpu.cfs_quota_us"))
	ps, err2 := ctlfile.Read(filepath.Join(parent, "cpu.cfs_period_us"))
	if err1 != nil || err2 != nil {
		return 0, false
	}
	q, err1 := strconv.ParseFloat(qs, 64)
	p, err2 := strconv.ParseFloat(ps, 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0, false
	}
	return q / p, true
}

// enableCPU enables the cpu controller in leaf's cgroup.subtree_control,
// journalled, unless it is already (v2).
func (p *Pacer) enableCPU(ctx context.Context, g *paceGroup, leaf string) error {
	ctl := filepath.Join(leaf, journal.FileSubtreeControl)
	cur, err := ctlfile.Read(ctl)
	if err != nil {
		return err
	}
	if slices.Contains(strings.Fields(cur), "cpu") {
		return nil
	}
	avail, err := ctlfile.Read(filepath.Join(leaf, "cgroup.controllers"))
	if err != nil {
		return err
	}
	if !slices.Contains(strings.Fields(avail), "cpu") {
		return fmt.Errorf("%s: the cpu controller is not enabled for it by its parent: %w", leaf, ErrNotPaceable)
	}
	c, err := journal.SubtreeCPUChange(leaf)
	if err != nil {
		return err
	}
	id, err := p.Journal.Record(c)
	if err != nil {
		return err
	}
	g.records = append(g.records, id)
	if err := ctlfile.WriteCtx(ctx, ctl, "+cpu"); err != nil {
		return fmt.Errorf("enable cpu below %s: %v: %w", leaf, err, ErrNotPaceable)
	}
	return nil
}

// undo undoes journal record id at once (what Recover would do) and marks
// it done.
func (p *Pacer) undo(id uint64) error {
	return p.Journal.UndoNow(id)
}

// parseSchedStat takes the time a thread has run from its schedstat
// file's first field (nanoseconds; kernel/sched/stats.c, show_schedstat).
func parseSchedStat(tid int, b []byte) (time.Duration, error) {
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("/proc/%d/schedstat: empty", tid)
	}
	ns, err := strconv.ParseUint(f[0], 10, 63)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/schedstat: %w", tid, err)
	}
	return time.Duration(ns), nil
}

// threadFile is the path of one thread's own file name under procRoot:
// /proc/TID/task/TID/name. /proc/TID/io itself is the thread group's,
// every thread's counters summed (fs/proc/base.c: tgid_base_stuff's io
// is proc_tgid_io_accounting, tid_base_stuff's proc_tid_io_accounting),
// which would make every thread of a dirtying process look like a
// dirtier.
func threadFile(procRoot string, tid int, name string) string {
	t := strconv.Itoa(tid)
	return filepath.Join(procRoot, t, "task", t, name)
}

// cpuStat reads the time key gives in cpu.stat p, counted in unit.
func cpuStat(p, key string, unit time.Duration) (time.Duration, error) {
	s, err := ctlfile.Read(p)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 63)
			if err != nil || n > math.MaxInt64/uint64(unit) {
				return 0, fmt.Errorf("read %s: %s %q: want a count of %s up to %d", p, key, v, unit, math.MaxInt64/uint64(unit))
			}
			return time.Duration(n) * unit, nil
		}
	}
	return 0, fmt.Errorf("read %s: no %s", p, key)
}

// Throttled is the time the episode's limit has held its threads: the sum
// of its pace groups' throttled time, which each group counts from its
// creation with the episode (v1 cpu.stat throttled_time, in nanoseconds;
// v2 throttled_usec).
func (e *Paced) Throttled() (time.Duration, error) {
	key, unit := "throttled_time", time.Nanosecond
	if e.v2 {
		key, unit = "throttled_usec", time.Microsecond
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var total time.Duration
	for _, g := range e.groups {
		held, err := cpuStat(filepath.Join(g.dir, "cpu.stat"), key, unit)
		if err != nil {
			return 0, err
		}
		total += held
	}
	return total, nil
}

var _ host.PacedThrottled = (*Paced)(nil)

// dirtiers returns the threads of cg that dirtied pages lately: Dirtiers'
// answer, or those whose write_bytes grew since the last sample. When the
// last is too old it takes a new one and then others firstSampleGap and
// laterSampleGap after, until a thread is seen to grow.
func (p *Pacer) dirtiers(ctx context.Context, cg host.Cgroup) ([]int, error) {
	if p.Dirtiers != nil {
		return p.Dirtiers.Dirtiers(cg, dirtierWindow)
	}
	p.mu.Lock()
	prev, ok := p.samples[cg]
	p.mu.Unlock()
	gaps := []time.Duration{firstSampleGap, laterSampleGap}
	if ok && time.Since(prev.at) <= sampleMaxAge {
		gaps = []time.Duration{0}
	} else {
		var err error
		if prev, err = p.sample(cg); err != nil {
			return nil, err
		}
	}
	var out []int
	for _, gap := range gaps {
		if gap > 0 {
			t := time.NewTimer(gap)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
		}
		cur, err := p.sample(cg)
		if err != nil {
			return nil, err
		}
		p.mu.Lock()
		if p.samples == nil {
			p.samples = map[host.Cgroup]threadSample{}
		}
		p.samples[cg] = cur
		p.mu.Unlock()
		out = grown(prev, cur)
		if len(out) > 0 {
			break
		}
	}
	return out, nil
}

// grown returns the threads of cur whose write_bytes grew since prev,
// sorted; a thread new since counts from 0.
func grown(prev, cur threadSample) []int {
	var out []int
	for tid, n := range cur.bytes {
		if n > prev.bytes[tid] {
			out = append(out, tid)
		}
	}
	slices.Sort(out)
	return out
}

// sample reads the write_bytes of every thread of cg.
func (p *Pacer) sample(cg host.Cgroup) (threadSample, error) {
	file := "tasks"
	if p.Layout.Memory.Version == layout.V2 {
		file = journal.FileThreads
	}
	tids, err := journal.ReadTIDs(filepath.Join(p.Layout.Memory.Dir(cg), file))
	if err != nil {
		return threadSample{}, err
	}
	s := threadSample{at: time.Now(), bytes: make(map[int]uint64, len(tids))}
	for _, tid := range tids {
		b, err := os.ReadFile(threadFile(p.ProcRoot, tid, "io"))
		if err != nil {
			continue // exited, or not ours to read
		}
		var io format.TaskIO
		if format.ParseTaskIO(b, &io) == nil {
			s.bytes[tid] = io.WriteBytes
		}
	}
	return s, nil
}
