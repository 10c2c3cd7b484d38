package kernel

// Tasks and the system calls workloads use: write(2) into the page cache,
// read(2) from disk, anonymous faults, and sleeping. A task runs in steps;
// each step is one event, and a system call returns early when the task
// must sleep (a dirty throttling pause, reclaim throttling, a read) or has
// used its step's CPU budget, so that other events interleave.

// Workload drives one task: Step is called each time the task runs and
// makes at most one system call. It reports whether the task has finished.
type Workload interface {
	Step(k *Kernel, t *Task) (done bool)
}

// StopCause is what a task is stopped by while it sleeps.
type StopCause uint8

// The causes of Task.Stopped.
const (
	// StopSleep is the workload's own sleep (think time, pacing), not a
	// stop.
	StopSleep StopCause = iota
	// StopDirtyPause is balance_dirty_pages() pausing the dirtier (and
	// the 2.6.33 throttle's waits).
	StopDirtyPause
	// StopFrozen is the cgroup freezer: memcgd's timed pause or held
	// freeze.
	StopFrozen
	// StopCPUThrottled is CFS bandwidth control: the task's cpu group
	// ran out of runtime (sched_fair_bandwidth.go).
	StopCPUThrottled
	// StopReclaim is memory stall sleeps: reclaim throttling, waits on
	// writeback in reclaim, memory.high penalties, allocation retries.
	StopReclaim
	// StopSync is fsync/fdatasync waiting for writeback and the journal.
	StopSync
	// StopRead is waiting for a read.
	StopRead
	// NrStopCauses is the number of causes.
	NrStopCauses
)

// Task is a simulated process.
type Task struct {
	id    int32
	memcg int32
	w     Workload
	gen   uint32
	clock Time // the task's time while it runs

	sleeping bool
	done     bool
	// sleepCause is what the current sleep counts as.
	sleepCause StopCause
	sleepStart Time
	// freezableSleep: the current sleep is nanosleep(), which the
	// cgroup freezer holds at its end until thawed.
	freezableSleep bool

	// cpu is the task's cpu group (0: the root task group); cpuWait the
	// group whose throttle stopped it, nilIdx if none.
	cpu, cpuWait int32
	// sync is an fdatasync() in progress (sync.go).
	sync fsyncState

	// balance_dirty_pages state (struct task_struct).
	nrDirtied, nrDirtiedPause int64
	dirtyPausedWhen           Time
	bdpAgain                  bool
	written2633               int64 // pages_written of the 2.6.33 throttle's loop

	// try_charge_memcg state kept across sleeps.
	nrRetries int
	drained   bool
	overHigh  int64

	throttled     bool
	waitIno       int32
	waitSeq       int64
	readsInFlight int

	// Start and End bound the task's life; the rest is where its time
	// went.
	Start, End Time
	// CPU is time spent running (copying, reclaiming).
	CPU Time
	// Stall is memory stall: direct and limit reclaim, reclaim
	// throttling, waits on writeback, memory.high penalties.
	Stall Time
	// Paused is time in balance_dirty_pages pauses (and memcgd's).
	Paused Time
	// IOWait is time waiting for reads.
	IOWait Time
	// Stopped is the time the task was stopped, by cause (StopSleep is
	// its own sleeps). Paused is Stopped[StopDirtyPause] +
	// Stopped[StopFrozen]; Stall includes Stopped[StopReclaim] besides
	// reclaim's CPU time; IOWait is Stopped[StopRead].
	Stopped [NrStopCauses]Time
	// Pauses counts balance_dirty_pages pauses.
	Pauses int64
	// Written and Read count pages.
	Written, Read int64
	// Name is the workload's name for reports.
	Name string

	lastIno     int32
	frozenUntil Time
	// freezeWait: t is stopped in a held freeze of its cgroup until a
	// thaw wakes it.
	freezeWait bool
}

// ID is the task's index.
func (t *Task) ID() int32 { return t.id }

// Memcg is the cgroup the task runs in.
func (t *Task) Memcg() int32 { return t.memcg }

// Now is the task's current time.
func (t *Task) Now() Time { return t.clock }

// stepBudget bounds the CPU time of one step, so that a task does not run
// ahead of the disks and timers.
const stepBudget = 200 * Microsecond

// NewTask starts a task in cgroup m at time start.
func (k *Kernel) NewTask(name string, m int32, w Workload, start Time) *Task {
	t := &Task{id: int32(len(k.tasks)), memcg: m, w: w, Start: start, Name: name, waitIno: nilIdx, cpuWait: nilIdx,
		sync: fsyncState{ino: nilIdx}}
	t.nrDirtiedPause = DirtyPollThresh
	k.tasks = append(k.tasks, t)
	k.live++
	k.heap.push(start, evTask, t.id, t.gen)
	return t
}

// runTask runs one step of t: what a sleep left to finish, then the
// workload. A task in a cpu group stops first if the group is throttled,
// and is charged the step's CPU time after it.
func (k *Kernel) runTask(t *Task) {
	t.clock = k.now
	if t.cpu > 0 && k.cfsThrottledWait(t) {
		return
	}
	begin := t.clock
	k.stepTask(t, begin)
	if t.cpu > 0 && t.clock > begin {
		k.accountCFSRuntime(t.cpu, t.clock-begin, t.clock)
	}
}

func (k *Kernel) stepTask(t *Task, begin Time) {
	if t.bdpAgain {
		t.bdpAgain = false
		if !k.balanceDirtyPages(t, k.wbFor(k.inodes[t.lastIno].disk, k.inodes[t.lastIno].owner)) {
			return
		}
	}
	if t.overHigh > 0 && !k.handleOverHigh(t) {
		return
	}
	if t.sync.ino != nilIdx && !k.fdatasyncResume(t) {
		return
	}
	done := t.w.Step(k, t)
	t.CPU += t.clock - begin
	if done {
		t.done = true
		t.End = t.clock
		k.live--
		return
	}
	if !t.sleeping {
		k.heap.push(max(t.clock, k.now+Nanosecond), evTask, t.id, t.gen)
	}
}

// sleep puts t to sleep until at, the time counted as cause.
func (k *Kernel) sleep(t *Task, at Time, cause StopCause) {
	t.sleeping = true
	t.sleepCause = cause
	t.sleepStart = t.clock
	t.gen++
	k.heap.push(at, evTask, t.id, t.gen)
}

// block puts t to sleep until something wakes it.
func (k *Kernel) block(t *Task, cause StopCause) {
	t.sleeping = true
	t.sleepCause = cause
	t.sleepStart = t.clock
	t.gen++
}

// chargeStop counts d stopped by cause, and in the summary counters.
func (t *Task) chargeStop(cause StopCause, d Time) {
	t.Stopped[cause] += d
	switch cause {
	case StopDirtyPause, StopFrozen:
		t.Paused += d
	case StopReclaim:
		t.Stall += d
	case StopRead:
		t.IOWait += d
	}
}

// wake makes a blocked t runnable now.
func (k *Kernel) wake(t *Task) {
	if !t.sleeping || t.done {
		return
	}
	t.gen++
	k.heap.push(max(k.now, t.sleepStart), evTask, t.id, t.gen)
}

// taskEvent handles evTask.
func (k *Kernel) taskEvent(t *Task) {
	if t.done {
		return
	}
	if t.sleeping {
		t.sleeping = false
		t.chargeStop(t.sleepCause, k.now-t.sleepStart)
		if t.throttled {
			t.throttled = false
			k.node.nrWritebackThrottled--
		}
		if t.waitSeq > 0 {
			k.inodes[t.waitIno].waiters--
			t.waitSeq = 0
		}
		if t.freezableSleep {
			// The freezer holds a task whose nanosleep ends while its
			// cgroup is frozen: it returns to user mode at the thaw.
			t.freezableSleep = false
			t.clock = k.now
			if k.stopFrozen(t) {
				return
			}
		}
	}
	k.runTask(t)
}

// Sleep makes t sleep for d (a workload's think time or pacing). A task
// that a system call already put to sleep stays on that sleep: the
// workload runs again when it ends.
func (k *Kernel) Sleep(t *Task, d Time) {
	if t.sleeping {
		return
	}
	k.sleep(t, t.clock+d, StopSleep)
}

// Nanosleep is nanosleep(2) for d: a freezable sleep, so a frozen cgroup
// (held or timed) keeps t stopped past its end until the thaw, and a
// throttled cpu group until the refill; the workload runs again only
// then. A task already put to sleep by a system call stays on that sleep.
func (k *Kernel) Nanosleep(t *Task, d Time) {
	if t.sleeping {
		return
	}
	k.sleep(t, t.clock+d, StopSleep)
	t.freezableSleep = true
}

// Freeze stops t for d (memcgd's pause: cgroup.freeze or the v1 freezer).
// The task stops at its next system call and sleeps until the freeze
// ends; a sleep it is already in is not lengthened.
func (k *Kernel) Freeze(t *Task, d Time) {
	if t.done {
		return
	}
	t.frozenUntil = max(t.frozenUntil, k.now+d)
}

// NewInode creates an empty file on disk di.
func (k *Kernel) NewInode(di int32) int32 {
	k.inodes = append(k.inodes, inode{disk: di, wb: nilIdx, owner: nilIdx,
		dirty: extList{nilIdx, nilIdx, 0}, wback: extList{nilIdx, nilIdx, 0},
		lprev: nilIdx, lnext: nilIdx, mprev: nilIdx, mnext: nilIdx})
	return int32(len(k.inodes) - 1)
}

// Write is write(2) of n pages at page pgoff of inode ino, in blocks of
// block pages (one folio each; accesses is how many times each page is
// touched, more than once for writes smaller than a page). It returns the
// pages written before the task had to sleep or yield.
func (k *Kernel) Write(t *Task, ino int32, pgoff, n, block int64, accesses int) int64 {
	if k.stopFrozen(t) {
		return 0
	}
	in := &k.inodes[ino]
	m := t.memcg
	if in.owner == nilIdx {
		in.owner = m
		in.wb = k.wbFor(in.disk, m)
	}
	t.lastIno = ino
	w := in.wb
	start := t.clock
	var done int64
	fl := uint8(0)
	if accesses > 1 {
		// folio_mark_accessed() twice: the second access activates
		// (lru_cache_activate_folio while still in the add batch).
		fl = fActive
	} else if accesses == 1 {
		fl = fReferenced
	}
	for done < n {
		b := min(block, n-done)
		if !k.allocPages(t, b) {
			break
		}
		if !k.tryChargeMemcg(t, m, b) {
			break
		}
		k.addPages(m, ino, pgoff+done, b, stDirty, fl)
		if fl&fActive != 0 {
			k.countEvent(m, mePgactivate, b)
		}
		in = &k.inodes[ino]
		in.cached += b
		// folio_account_dirtied()
		k.modStat(m, msFileDirty, b)
		k.countEvent(m, meDirtied, b)
		k.node.vmstat[NrDirtied] += b
		k.wbs[w].reclaimable += b
		k.wbs[w].dirtied += b
		k.markInodeDirty(ino, t.clock)
		if !in.onMemcg {
			k.memcgInodeAdd(ino)
		}
		k.afterCharge(m)
		t.clock += Time(b) * k.cfg.WriteCostPerPage
		done += b
		t.Written += b
		t.nrDirtied += b
		ratelimit := t.nrDirtiedPause
		if k.wbs[w].dirtyExceeded {
			ratelimit = min(ratelimit, 32>>(PageShift-10))
		}
		if t.nrDirtied >= ratelimit {
			if !k.balanceDirtyPages(t, w) {
				break
			}
		}
		if t.overHigh > MemcgChargeBatch {
			if !k.handleOverHigh(t) {
				break
			}
		}
		if t.clock-start >= stepBudget || t.sleeping {
			break
		}
	}
	return done
}

// Read is a cold read(2) of n pages at pgoff of ino: the pages are added to
// the page cache clean and read from disk in one request per readahead
// window; the task waits for them.
func (k *Kernel) Read(t *Task, ino int32, pgoff, n int64) int64 {
	if k.stopFrozen(t) {
		return 0
	}
	in := &k.inodes[ino]
	m := t.memcg
	if !k.allocPages(t, n) || !k.tryChargeMemcg(t, m, n) {
		return 0
	}
	d := &k.disks[in.disk]
	k.addPages(m, ino, pgoff, n, stClean, fReferenced)
	k.inodes[ino].cached += n
	k.afterCharge(m)
	t.clock += Time(n) * k.cfg.ReadCostPerPage
	t.Read += n
	for off := int64(0); off < n; off += d.cfg.MaxRequestPages {
		k.submit(in.disk, t.clock, request{pages: min(d.cfg.MaxRequestPages, n-off), ino: ino, task: t.id, read: true})
		t.readsInFlight++
	}
	k.block(t, StopRead)
	return n
}

// AllocAnon faults in n anonymous pages for t (it may sleep first and
// return fewer).
func (k *Kernel) AllocAnon(t *Task, n int64) int64 {
	if k.stopFrozen(t) {
		return 0
	}
	var done int64
	start := t.clock
	for done < n {
		b := min(int64(MemcgChargeBatch), n-done)
		if !k.allocPages(t, b) || !k.tryChargeMemcg(t, t.memcg, b) {
			break
		}
		k.addPages(t.memcg, -1, 0, b, stClean, 0)
		k.afterCharge(t.memcg)
		t.clock += Time(b) * k.cfg.AnonCostPerPage
		done += b
		// try_charge_memcg(): past MEMCG_CHARGE_BATCH pages over high,
		// handle it now rather than on the return to user mode.
		if t.overHigh > MemcgChargeBatch && !k.handleOverHigh(t) {
			break
		}
		if t.clock-start >= stepBudget || t.sleeping {
			break
		}
	}
	return done
}

// FreeAnon unmaps n of t's cgroup's anonymous pages (newest first).
func (k *Kernel) FreeAnon(t *Task, n int64) {
	m := t.memcg
	for n > 0 {
		lst := &k.memcgs[m].lru[lruInactiveAnon]
		i := lst.head
		if i == nilIdx {
			return
		}
		e := &k.ext[i]
		if e.n > n {
			e.n -= n
			lst.pages -= n
			k.lruStat(m, lruInactiveAnon, -n)
			k.uncharge(m, n)
			return
		}
		c := e.n
		k.lruDel(i)
		k.uncharge(m, c)
		k.freeExtent(i)
		n -= c
	}
}

// Tasks returns the tasks in cgroup m (not its descendants).
func (k *Kernel) Tasks(m int32) []*Task {
	var out []*Task
	for _, t := range k.tasks {
		if t.memcg == m && !t.done {
			out = append(out, t)
		}
	}
	return out
}

// Done reports whether the task has finished.
func (t *Task) Done() bool { return t.done }

// Compute spends d of CPU time in user space (a compiler's work).
func (k *Kernel) Compute(t *Task, d Time) {
	if !t.sleeping {
		t.clock += d
	}
}
