// Package watch waits for the kernel to say that a memory cgroup needs a
// look: Watcher arms the kernel's own notifications per cgroup (v1 eventfd
// thresholds and vmpressure; v2 memory.events.local, a PSI trigger and an
// adaptive memory.current poll) and delivers the cgroups they name;
// NewCgroups reports cgroups created and removed beneath a subtree
// (inotify).
//
// Invariants: a cgroup occupies at most one place in a Watcher's queue
// (reports coalesce until received); one goroutine waits for the kernel
// and one hands reports on, and neither closes a file descriptor while
// holding the Watcher's lock; a watch holds at most one file descriptor
// on v1 and three on v2. A watch lives from the caller's Watch to its
// Unwatch, but for a cgroup the kernel reports removed: its descriptors
// are dead then (a removed cgroup's PSI trigger polls as an error for
// good), so the Watcher closes them and reports the cgroup once.
package watch

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/cgroupfs/observe"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/internal/pollfd"
	"github.com/memcgd/memcgd/memcg"
)

// Watcher is the real kernel's host.Watcher. It arms the kernel's own
// notifications for each watched memory cgroup and waits for all of them
// in one goroutine waiting on the epoll set (parked on the runtime's
// poller: internal/pollfd), so that an idle cgroup costs
// no CPU time at all on cgroup v1, and on v2, which has no usage
// thresholds, one read of memory.current per cgroup at intervals set by
// its distance to its threshold (watch_schedule.go):
//
//	cgroup v1 (watch_v1.go): one eventfd per cgroup carrying a
//	memory.usage_in_bytes threshold and a memory.pressure_level
//	"low,local" registration (cgroup.event_control);
//	cgroup v2 (watch_v2.go): memory.events.local and a PSI trigger on
//	memory.pressure, both polled for EPOLLPRI, and memory.current read
//	on an adaptive schedule, MinUsagePoll to UsagePoll apart.
//
// Reports are coalesced: a cgroup waiting in the queue, or being handed
// to the receiver, is not queued again, since a receiver observes the
// cgroup after receiving it and so sees whatever a second report would
// have announced. A cgroup therefore occupies at most one place in the
// queue, and reclaim that signals a cgroup hundreds of times a second
// cannot crowd others out. Only more than WatcherOptions.Queue distinct
// waiting cgroups drop reports (Dropped counts them).
//
// docs/watch.md gives the choices made and what a watch costs, measured.
// A Watcher is safe for concurrent use.
type Watcher struct {
	layout layout.Layout
	opts   WatcherOptions
	// pageSize is the unit in which the kernel compares usage with a
	// threshold.
	pageSize uint64
	epfd     int
	// wakefd is an eventfd in the epoll set that wakes the loop: to stop
	// it, or to make it recompute its timeout.
	wakefd int
	// poll is epfd on the runtime's poller, where the loop waits; nil if
	// it could not join it (the loop then blocks in epoll_wait).
	poll *pollfd.File

	out      chan host.Cgroup // unbuffered: a send completes on receipt
	kick     chan struct{}    // wakes the sender when a cgroup is queued
	done     chan struct{}    // closed by Close to stop the sender
	loopDone chan struct{}
	sendDone chan struct{}
	dropped  atomic.Uint64
	// psiRefused counts v2 watches armed without their PSI trigger
	// because the kernel refused it.
	psiRefused atomic.Uint64
	// usageReads counts the reads of memory.current (v2).
	usageReads atomic.Uint64

	// mu guards everything below. The loop holds it while it handles a
	// batch of events, so that a file descriptor is never closed while
	// the loop reads it. File descriptors are closed after mu is released
	// (unlock): closing a PSI trigger waits for an RCU grace period and
	// for its psimon thread to stop (kernel/sched/psi.c,
	// psi_trigger_destroy), tens of milliseconds.
	mu      sync.Mutex
	closed  bool
	err     error // what stopped the loop, if anything but Close
	watches map[host.Cgroup]*watched
	sources map[uint64]*wakeSource // by epoll token
	token   uint64                 // the last token handed out; 0 is wakefd's
	closing []int                  // taken out of the epoll set, to close in unlock

	queue wakeQueue // the cgroups reported and not yet received

	// psiRefusal is why the kernel last refused a PSI trigger.
	psiRefusal error
	// writeTrigger writes a PSI trigger to the memory.pressure file fd
	// of the cgroup at dir: write(2), or a refusal in tests.
	writeTrigger func(dir string, fd int, b []byte) (int, error)

	reader *observe.Reader // reads at arming and on the v1 notification path
	buf    []byte          // the v2 usage poll's read buffer
	// schedule holds the v2 watches whose usage the loop polls, by when
	// each is next due on the monotonic clock since start; rule sets the
	// intervals.
	schedule usageSchedule
	rule     pollRule
	start    time.Time
}

var _ host.Watcher = (*Watcher)(nil)

// Defaults of WatcherOptions.
const (
	DefaultWatchQueue   = 4096
	DefaultUsagePoll    = 30 * time.Second
	DefaultMinUsagePoll = 100 * time.Millisecond
	DefaultUsageRate    = 4 << 20 // bytes per second
	DefaultPSIStall     = 50 * time.Millisecond
	DefaultPSIWindow    = time.Second
)

// WatcherOptions tunes a Watcher. Zero fields take the defaults.
type WatcherOptions struct {
	// Queue bounds how many reported cgroups wait to be received from
	// Events; default DefaultWatchQueue.
	Queue int
	// UsagePoll is the longest the Watcher leaves memory.current of a v2
	// cgroup watched with a UsageAbove unread (v2 has no usage
	// thresholds): the interval of a cgroup far below its threshold and
	// not growing, and so the longest a sudden crossing can go
	// unreported; default DefaultUsagePoll. Unused on v1.
	UsagePoll time.Duration
	// MinUsagePoll is the shortest interval between two reads of a
	// cgroup's memory.current, that of a cgroup near its threshold or
	// growing fast; default DefaultMinUsagePoll, at most UsagePoll.
	MinUsagePoll time.Duration
	// UsageRate, in bytes per second, is the growth the schedule allows
	// for in a cgroup that its reads do not see growing faster: such a
	// cgroup is read again before it could reach its threshold at this
	// rate (watch_schedule.go); default DefaultUsageRate.
	UsageRate uint64
	// PSI is the memory.pressure trigger armed on each v2 cgroup; the zero
	// value means "some" stall of DefaultPSIStall within DefaultPSIWindow.
	PSI PSITrigger
	// NoPSI arms no PSI trigger. On kernels before 6.5, and on later ones
	// for a process with CAP_SYS_RESOURCE, each cgroup with a trigger gets
	// its own "psimon" kernel thread (kernel/sched/psi.c,
	// psi_trigger_create); see docs/watch.md.
	NoPSI bool
}

// PSITrigger is a PSI trigger (Documentation/accounting/psi.rst): report
// the cgroup when its tasks were stalled on memory for Stall in total
// within a moving Window.
type PSITrigger struct {
	// Full counts only the time when all of the cgroup's non-idle tasks
	// were stalled at once; otherwise any stalled task counts ("some").
	Full bool
	// Stall is the stall time that fires the trigger, at most Window.
	Stall time.Duration
	// Window is the moving window, 500 ms to 10 s. Without
	// CAP_SYS_RESOURCE, Linux 6.5 and later accept only whole multiples
	// of 2 s.
	Window time.Duration
}

// Limits of a PSI trigger's window (kernel/sched/psi.c, WINDOW_MIN_US and
// WINDOW_MAX_US).
const (
	minPSIWindow = 500 * time.Millisecond
	maxPSIWindow = 10 * time.Second
)

// String returns the trigger as written to memory.pressure:
// "some|full <stall µs> <window µs>".
func (p PSITrigger) String() string {
	kind := "some"
	if p.Full {
		kind = "full"
	}
	return fmt.Sprintf("%s %d %d", kind, p.Stall.Microseconds(), p.Window.Microseconds())
}

func (p PSITrigger) validate() error {
	switch {
	case p.Window < minPSIWindow || p.Window > maxPSIWindow || p.Window%time.Microsecond != 0:
		return fmt.Errorf("PSI.Window %v: want %v to %v in whole microseconds", p.Window, minPSIWindow, maxPSIWindow)
	case p.Stall <= 0 || p.Stall > p.Window || p.Stall%time.Microsecond != 0:
		return fmt.Errorf("PSI.Stall %v: want more than 0 and at most PSI.Window (%v), in whole microseconds", p.Stall, p.Window)
	}
	return nil
}

// withDefaults fills in the zero fields and checks the rest.
func (o WatcherOptions) withDefaults() (WatcherOptions, error) {
	switch {
	case o.Queue < 0:
		return o, fmt.Errorf("watcher options: Queue %d: want 0 (default %d) or more", o.Queue, DefaultWatchQueue)
	case o.Queue == 0:
		o.Queue = DefaultWatchQueue
	}
	switch {
	case o.UsagePoll < 0:
		return o, fmt.Errorf("watcher options: UsagePoll %v: want 0 (default %v) or more", o.UsagePoll, DefaultUsagePoll)
	case o.UsagePoll == 0:
		o.UsagePoll = DefaultUsagePoll
	}
	switch {
	case o.MinUsagePoll < 0:
		return o, fmt.Errorf("watcher options: MinUsagePoll %v: want 0 (default %v) or more", o.MinUsagePoll, DefaultMinUsagePoll)
	case o.MinUsagePoll == 0:
		o.MinUsagePoll = min(DefaultMinUsagePoll, o.UsagePoll)
	case o.MinUsagePoll > o.UsagePoll:
		return o, fmt.Errorf("watcher options: MinUsagePoll %v: want at most UsagePoll (%v)", o.MinUsagePoll, o.UsagePoll)
	}
	if o.UsageRate == 0 {
		o.UsageRate = DefaultUsageRate
	}
	if o.PSI == (PSITrigger{}) {
		o.PSI = PSITrigger{Stall: DefaultPSIStall, Window: DefaultPSIWindow}
	}
	if !o.NoPSI {
		if err := o.PSI.validate(); err != nil {
			return o, fmt.Errorf("watcher options: %w", err)
		}
	}
	return o, nil
}

// UsagePollInterval returns how long, with these options, a v2 cgroup
// whose usage was last read distance bytes below its threshold goes
// unread if its reads have not seen it growing: the longest a crossing
// then goes unreported. A cgroup seen growing faster than UsageRate is
// read sooner.
func (o WatcherOptions) UsagePollInterval(distance uint64) (time.Duration, error) {
	o, err := o.withDefaults()
	if err != nil {
		return 0, err
	}
	r := pollRule{min: o.MinUsagePoll, max: o.UsagePoll, rate: float64(o.UsageRate)}
	return r.interval(distance, 0), nil
}

// watched is the watch of one cgroup: the kernel objects armed for it.
// A file descriptor field is -1 when not open.
type watched struct {
	cg   host.Cgroup
	wake host.Wake

	// v1: the eventfd of both registrations, and the failcnt seen last.
	efd     int
	failcnt uint64

	// v2: memory.events.local, and memory.current when polled; poll
	// when it is read next. (The PSI trigger's file is known only as a
	// source.) above tells whether usage was last found above the
	// threshold: by the v2 poll, or on v1 at arming and at each signal.
	events, current int
	above           bool
	poll            usagePoll

	tokens [2]uint64 // the epoll tokens of this watch's sources
}

// sourceKind says what a file descriptor in the epoll set is.
type sourceKind int

const (
	sourceV1Event  sourceKind = iota // v1 eventfd: threshold or vmpressure or removal
	sourceV2Events                   // v2 memory.events.local changed
	sourceV2PSI                      // v2 PSI trigger fired, or its cgroup was removed
)

// wakeSource is one file descriptor in the epoll set.
type wakeSource struct {
	w    *watched
	kind sourceKind
	fd   int
}

// NewWatcher returns a Watcher of the memory cgroups of l, with its epoll
// goroutine running.
func NewWatcher(l layout.Layout, opts WatcherOptions) (*Watcher, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("new watcher: epoll_create1: %w", err)
	}
	wakefd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("new watcher: eventfd: %w", err)
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wakefd, &unix.EpollEvent{Events: unix.EPOLLIN}); err != nil {
		unix.Close(wakefd)
		unix.Close(epfd)
		return nil, fmt.Errorf("new watcher: epoll_ctl: %w", err)
	}
	w := &Watcher{
		layout:   l,
		opts:     opts,
		pageSize: uint64(unix.Getpagesize()),
		epfd:     epfd,
		wakefd:   wakefd,
		out:      make(chan host.Cgroup),
		kick:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		loopDone: make(chan struct{}),
		sendDone: make(chan struct{}),
		watches:  make(map[host.Cgroup]*watched),
		sources:  make(map[uint64]*wakeSource),
		queue:    newWakeQueue(opts.Queue),
		writeTrigger: func(_ string, fd int, b []byte) (int, error) {
			return unix.Write(fd, b)
		},
		reader: observe.NewReader(l),
		buf:    make([]byte, 4096),
		rule:   pollRule{min: opts.MinUsagePoll, max: opts.UsagePoll, rate: float64(opts.UsageRate)},
		start:  time.Now(),
	}
	if p, err := pollfd.Open(epfd, "watcher epoll"); err == nil {
		w.poll = p
	}
	go w.loop()
	go w.send()
	return w, nil
}

// ReportOnce reports cg, if it is watched and w is not closed, for a
// source that reports once per Watch (the eBPF tracker): such a report is
// never coalesced into one already on its way to the receiver (see send).
// It takes w's lock, which the loop holds through a pass of the usage
// poll: call it holding no lock the caller's Watch path needs.
func (w *Watcher) ReportOnce(cg host.Cgroup) {
	w.mu.Lock()
	defer w.unlock()
	if !w.closed && w.watches[cg] != nil {
		w.reportOnce(cg)
	}
}

// errWatcherClosed is returned by Watch after Close.
var errWatcherClosed = errors.New("watcher closed")

// Watch starts watching cg, or replaces the Wake of a watched cg. The
// cgroup is reported when its usage is at or above w.UsageAbove when this
// call arms the threshold, or crosses it upwards later (usage is compared
// in pages, as the kernel does); when reclaim runs against its own limit;
// and on v2 when memory.events.local changes or the PSI trigger fires.
// Reporting usage already above matters because the caller sets the
// threshold from an earlier observation: a cgroup that filled meanwhile
// would otherwise go unreported, since the kernel's thresholds (and the
// v2 poll) signal only crossings. The other conditions are events, not
// levels, and count only from this call on. A call with the Wake already
// armed changes nothing and reports nothing.
// A cgroup removed while watched is reported once and its watch dropped.
// If cg does not exist the error wraps host.ErrVanished.
func (w *Watcher) Watch(cg host.Cgroup, wake host.Wake) error {
	w.mu.Lock()
	defer w.unlock()
	if w.closed {
		return fmt.Errorf("watch %s: %w", cg, errWatcherClosed)
	}
	wt := w.watches[cg]
	if wt == nil {
		wt = &watched{cg: cg, wake: host.Wake{UsageAbove: memcg.NoLimit}, efd: -1, events: -1, current: -1,
			poll: usagePoll{index: -1}}
		var err error
		if w.layout.Memory.Version == layout.V2 {
			err = w.armV2(wt, wake)
		} else {
			err = w.armV1(wt, wake)
		}
		if err != nil {
			w.disarm(wt)
			return err
		}
		w.watches[cg] = wt
		return nil
	}
	if wt.wake == wake {
		return nil
	}
	var err error
	if w.layout.Memory.Version == layout.V2 {
		err = w.rearmV2(wt, wake)
	} else {
		err = w.armV1(wt, wake)
	}
	if errors.Is(err, host.ErrVanished) {
		w.drop(wt)
	}
	return err
}

// Unwatch stops watching cg and closes the file descriptors its watch
// held. A report of cg already queued stays queued.
func (w *Watcher) Unwatch(cg host.Cgroup) {
	w.mu.Lock()
	defer w.unlock()
	if wt := w.watches[cg]; wt != nil {
		w.drop(wt)
	}
}

// Events delivers the reported cgroups. It is closed by Close.
func (w *Watcher) Events() <-chan host.Cgroup { return w.out }

// Dropped returns how many reports were dropped because Queue cgroups
// were already waiting to be received.
func (w *Watcher) Dropped() uint64 { return w.dropped.Load() }

// PSIRefused returns how many v2 watches were armed without their PSI
// trigger because the kernel refused it; they rely on
// memory.events.local and the usage poll.
func (w *Watcher) PSIRefused() uint64 { return w.psiRefused.Load() }

// PSIRefusal returns why the kernel last refused a PSI trigger, or nil.
func (w *Watcher) PSIRefusal() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.psiRefusal
}

// UsageReads returns how many times the Watcher has read a v2 cgroup's
// memory.current, at arming and on its schedule: the usage poll's cost.
func (w *Watcher) UsageReads() uint64 { return w.usageReads.Load() }

// Len returns how many cgroups are watched.
func (w *Watcher) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.watches)
}

// Close stops every watch, closes its file descriptors and the Events
// channel. It returns the error that stopped the epoll loop early, if one
// did.
func (w *Watcher) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	w.wakeLoop()
	<-w.loopDone

	w.mu.Lock()
	for _, wt := range w.watches {
		w.drop(wt)
	}
	err := w.err
	w.unlock()
	close(w.done)
	<-w.sendDone
	if w.poll != nil {
		w.poll.Close()
	}
	unix.Close(w.wakefd)
	unix.Close(w.epfd)
	return err
}

// wakeLoop makes the loop return from its wait.
func (w *Watcher) wakeLoop() {
	one := [8]byte{1} // a native-endian uint64 1 on little-endian hosts; any non-zero value wakes
	_, _ = unix.Write(w.wakefd, one[:])
}

// maxEpollEvents is how many events one epoll_wait returns at most; more
// wait for the next call.
const maxEpollEvents = 256

// loop waits for the kernel's notifications and, on v2, polls usage when
// it is due. It is the only goroutine that waits for the kernel for the
// Watcher.
func (w *Watcher) loop() {
	defer close(w.loopDone)
	events := make([]unix.EpollEvent, maxEpollEvents)
	for {
		w.mu.Lock()
		timeout := w.timeout(w.clock())
		w.mu.Unlock()
		n, err := w.epollWait(events, timeout)
		if err == unix.EINTR {
			continue
		}
		w.mu.Lock()
		if err != nil {
			w.err = fmt.Errorf("watcher: epoll_wait: %w", err)
			w.mu.Unlock()
			return
		}
		if w.closed {
			w.mu.Unlock()
			return
		}
		for _, ev := range events[:n] {
			w.handle(ev)
		}
		w.unlock()
		w.pollDue()
	}
}

// epollWait is epoll_wait on the Watcher's set with timeout in
// milliseconds (-1: none). Where the set is on the runtime's poller it
// waits there, parked without a P (internal/pollfd says why), and an
// expired timeout returns no event.
func (w *Watcher) epollWait(events []unix.EpollEvent, timeout int) (int, error) {
	if w.poll == nil || timeout == 0 {
		return unix.EpollWait(w.epfd, events, timeout)
	}
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(time.Duration(timeout) * time.Millisecond)
	}
	var n int
	var werr error
	err := w.poll.Wait(func() bool {
		n, werr = unix.EpollWait(w.epfd, events, 0)
		return n > 0 || werr != nil
	}, deadline)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("wait on the runtime's poller: %w", err)
	}
	return n, werr
}

// clock is the schedule's time: monotonic, since the Watcher started.
func (w *Watcher) clock() time.Duration { return time.Since(w.start) }

// timeout returns epoll_wait's timeout in milliseconds: until the next
// usage read is due, or -1 (none) when there is nothing to poll.
func (w *Watcher) timeout(now time.Duration) int {
	due, ok := w.schedule.next()
	if !ok {
		return -1
	}
	d := due - now
	if d <= 0 {
		return 0
	}
	return int((d + time.Millisecond - 1) / time.Millisecond)
}

// handle acts on one epoll event.
func (w *Watcher) handle(ev unix.EpollEvent) {
	token := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
	if token == 0 {
		var b [8]byte
		_, _ = unix.Read(w.wakefd, b[:]) // reset the counter
		return
	}
	src := w.sources[token]
	if src == nil {
		return // its watch was dropped earlier in this batch
	}
	switch src.kind {
	case sourceV1Event:
		w.handleV1(src.w)
	case sourceV2Events:
		w.handleV2Events(src.w)
	case sourceV2PSI:
		w.handleV2PSI(src.w, ev.Events)
	}
}

// add puts fd in the epoll set for events, as a source of kind for wt,
// and returns its token.
func (w *Watcher) add(wt *watched, kind sourceKind, fd int, events uint32) (uint64, error) {
	w.token++
	t := w.token
	ev := unix.EpollEvent{Events: events, Fd: int32(uint32(t)), Pad: int32(uint32(t >> 32))}
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return 0, fmt.Errorf("watch %s: epoll_ctl: %w", wt.cg, err)
	}
	w.sources[t] = &wakeSource{w: wt, kind: kind, fd: fd}
	return t, nil
}

// remove takes the source of token out of the epoll set, at once, so
// that the loop never sees it again, and queues its file descriptor for
// closing.
func (w *Watcher) remove(token uint64) {
	src := w.sources[token]
	if src == nil {
		return
	}
	delete(w.sources, token)
	_ = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, src.fd, nil)
	w.closing = append(w.closing, src.fd)
}

// unlock releases mu, then closes the file descriptors that watches
// dropped meanwhile left behind.
func (w *Watcher) unlock() {
	fds := w.closing
	w.closing = nil
	w.mu.Unlock()
	closeAll(fds)
}

// closeAll closes fds, many at once when there are many: the grace
// periods that closing PSI triggers waits for then overlap, and closing
// 1,000 takes a few grace periods instead of 1,000.
func closeAll(fds []int) {
	const perWorker, maxWorkers = 16, 64
	workers := min(maxWorkers, (len(fds)+perWorker-1)/perWorker)
	if workers <= 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for fd := range next {
				unix.Close(fd)
			}
		})
	}
	for _, fd := range fds {
		next <- fd
	}
	close(next)
	wg.Wait()
}

// drop ends the watch of wt.
func (w *Watcher) drop(wt *watched) {
	w.disarm(wt)
	if w.watches[wt.cg] == wt {
		delete(w.watches, wt.cg)
	}
}

// disarm closes every file descriptor of wt.
func (w *Watcher) disarm(wt *watched) {
	for i, t := range wt.tokens {
		if t != 0 {
			w.remove(t)
			wt.tokens[i] = 0
		}
	}
	wt.efd, wt.events = -1, -1
	if wt.current >= 0 {
		w.closing = append(w.closing, wt.current)
		wt.current = -1
		w.schedule.remove(wt)
	}
}

// reportIfOver reports wt, through the queue like any other report, if
// usage, read just after its threshold was armed, is already at or above
// it; it returns whether it was.
func (w *Watcher) reportIfOver(wt *watched, usage uint64) bool {
	over := w.over(usage, wt.wake.UsageAbove)
	if over {
		w.report(wt.cg)
	}
	return over
}

// over reports whether usage has reached the threshold as the kernel
// compares them: in whole pages (mm/memcontrol-v1.c,
// __mem_cgroup_threshold, on page_counter_memparse's page count).
func (w *Watcher) over(usage, threshold uint64) bool {
	return threshold != memcg.NoLimit && usage/w.pageSize >= threshold/w.pageSize
}

// RaiseFileLimit raises the soft limit on open files (RLIMIT_NOFILE) to
// the hard limit and returns the soft limit in force. A watch holds one
// file descriptor on cgroup v1 and up to three on v2.
//
// Go programs rarely need it: since Go 1.19 the syscall package raises the
// soft limit to one below the hard limit at start (and restores the
// original for the processes it starts). RaiseFileLimit leaves that alone,
// so the restoring keeps working, and only raises a soft limit lowered
// since. It cannot raise the hard limit, which takes CAP_SYS_RESOURCE.
func RaiseFileLimit() (uint64, error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("getrlimit RLIMIT_NOFILE: %w", err)
	}
	if lim.Max == unix.RLIM_INFINITY || lim.Cur+1 >= lim.Max {
		return lim.Cur, nil
	}
	lim.Cur = lim.Max
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("setrlimit RLIMIT_NOFILE to %d: %w", lim.Cur, err)
	}
	return lim.Cur, nil
}
