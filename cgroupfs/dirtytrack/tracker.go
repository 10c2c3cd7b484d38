// Package dirtytrack is an eBPF tracker of the page-cache bytes each memory
// cgroup dirties. It counts, per watched cgroup, the bytes dirtied in its
// subtree; wakes the daemon through a ring buffer when a count passes a
// threshold the daemon set; remembers which inodes each cgroup dirtied, so
// their files can be written out after they were closed (OpenInode); and
// reports memory cgroups as they are created and removed.
//
// The program (bpf/dirtytrack.c) hooks the writeback_dirty_folio
// tracepoint, which fires from folio_account_dirtied() (mm/page-writeback.c)
// exactly where memory.stat dirty (v1) / file_dirty (v2) rises. It is
// optional: Load fails with an error wrapping ErrUnavailable when the
// kernel lacks BTF, the process lacks CAP_BPF and CAP_PERFMON, or lockdown
// forbids it, and the daemon then falls back to polling. docs/tracker.md has
// the design, the costs and the commands that measured them.
//
// Cgroup ids are kernfs node ids: the inode number of the cgroup's
// directory in the hierarchy that hosts the memory controller (CgroupID).
//
// Lock order: Tracker.mu, then nothing; the event goroutine takes mu only
// to drop the watch of a removed cgroup.
package dirtytrack

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// ErrUnavailable is wrapped by every error of Load: the tracker cannot run
// here and the caller should fall back to polling.
var ErrUnavailable = errors.New("eBPF dirty tracker unavailable")

// ErrNotWatched is returned for a cgroup id that is not watched.
var ErrNotWatched = errors.New("cgroup not watched")

// ErrTooManyWatched is returned by Watch when Options.MaxWatched cgroups are
// watched already.
var ErrTooManyWatched = errors.New("too many watched cgroups")

// Never is a wake-up threshold that is never passed.
const Never = math.MaxUint64

// Options size the tracker's maps. The zero value gives the defaults.
type Options struct {
	// MaxWatched bounds the cgroups watched at once (default 16384).
	MaxWatched uint32
	// MaxMemcgs bounds the memcgs whose watched ancestors are cached, an
	// LRU (default 16384).
	MaxMemcgs uint32
	// MaxInodes bounds the (cgroup, inode) records, an LRU: the oldest are
	// forgotten when it is full (default 65536).
	MaxInodes uint32
	// MaxRecent bounds the entries of the watched cgroups' rings of
	// recently dirtied inodes (Recent), recentLen per cgroup that
	// dirties, an LRU (default 16384: 1024 cgroups dirtying at once).
	MaxRecent uint32
	// RingBytes is the size of the ring buffer of cgroup mkdir/rmdir
	// events, and WakeRingBytes of the one of wake-ups: powers of two of at
	// least the page size (defaults 256 KiB, 64 KiB). A wake-up that finds
	// its ring full is retried at the cgroup's next dirtied folio; a
	// cgroup event is lost (Stats.Dropped).
	RingBytes     uint32
	WakeRingBytes uint32
	// EventBuffer is the capacity of the Events channel (default 4096).
	EventBuffer int
	// Logger receives the tracker's own messages (default slog.Default).
	Logger *slog.Logger
	// Levels asks for the level programs (Counts.Level, ArmLevel): four
	// fentry and fexit programs on the life of every dirty folio, whose
	// trampolines a kernel attaches and detaches slowly. Only a daemon
	// that paces uses them; a kernel that refuses them loses only them.
	Levels bool
}

func (o Options) withDefaults() (Options, error) {
	if o.MaxWatched == 0 {
		o.MaxWatched = 16384
	}
	if o.MaxMemcgs == 0 {
		o.MaxMemcgs = 16384
	}
	if o.MaxInodes == 0 {
		o.MaxInodes = 65536
	}
	if o.MaxRecent == 0 {
		o.MaxRecent = 16384
	}
	if o.RingBytes == 0 {
		o.RingBytes = 256 << 10
	}
	if o.WakeRingBytes == 0 {
		o.WakeRingBytes = 64 << 10
	}
	if o.EventBuffer == 0 {
		o.EventBuffer = 4096
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	page := uint32(os.Getpagesize())
	for _, r := range []struct {
		name string
		v    uint32
	}{{"RingBytes", o.RingBytes}, {"WakeRingBytes", o.WakeRingBytes}} {
		if r.v < page || r.v&(r.v-1) != 0 {
			return o, fmt.Errorf("dirtytrack options: %s %d: want a power of two of at least the page size %d", r.name, r.v, page)
		}
	}
	if o.EventBuffer < 0 {
		return o, fmt.Errorf("dirtytrack options: EventBuffer %d: want 0 (default) or more", o.EventBuffer)
	}
	return o, nil
}

// objects are the maps and the folio program; the cgroup programs are
// loaded apart (attachCgroupPrograms).
type objects struct {
	dirtytrackMaps
	DirtyFolio *ebpf.Program `ebpf:"dirty_folio"`
}

func (o *objects) Close() {
	o.dirtytrackMaps.Close()
	if o.DirtyFolio != nil {
		o.DirtyFolio.Close()
	}
}

// Tracker is the loaded eBPF dirty tracker. Its methods are safe for
// concurrent use.
type Tracker struct {
	opts  Options
	objs  objects
	links []link.Link
	rings []ring // wake-ups, cgroup events
	out   chan Event
	// handler, when set (Handle), takes the events instead of out.
	handler atomic.Pointer[func(Event)]
	done    chan struct{}
	wg      sync.WaitGroup
	// cgroupEvents reports whether the mkdir/rmdir programs are attached,
	// cancels whether the truncation one is (Counts.HasCancelled), levels
	// whether the level programs are (Counts.HasLevel).
	cgroupEvents bool
	cancels      bool
	levels       bool
	levelsOff    string // why levels is false
	// view is the counts array mapped, or empty where it could not be
	// (the counters are then looked up).
	view     countsView
	loadTime time.Duration

	mu    sync.Mutex // guards the fields below
	slots map[uint64]uint32
	// wakes are the wake-ups armed per slot, as last written to the
	// wakes map: a write replaces a slot's whole entry, so arming the
	// dirtied threshold keeps the dirtier report's arming and back.
	wakes   map[uint32]dirtytrackWake
	free    []uint32 // free slots, reused oldest-freed first
	seq     uint64   // last wake.seq handed out
	gen     uint32   // config.gen
	gone    map[uint64]bool
	mounts  map[uint64]string // superblock dev -> a mount point of it, for OpenInode
	closed  bool
	closeMu sync.Once

	// scanMu guards the buffers Inodes reads the inode map into, kept
	// between calls: a write-out calls it, hundreds of times a second for
	// a throttled writer, and fresh buffers cost 160 KB each.
	scanMu   sync.Mutex
	scanKeys []dirtytrackInodeKey
	scanVals []dirtytrackInodeVal
}

// Load loads and attaches the tracker. Every error wraps ErrUnavailable
// and names the likely cause (no BTF, missing capabilities, lockdown).
// When only the cgroup mkdir/rmdir tracepoints cannot attach, Load
// succeeds and CgroupEvents reports false.
func Load(opts Options) (*Tracker, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	// cilium/ebpf keeps the kernel's BTF, parsed to relocate the programs,
	// for the process's life: about 2 MiB of heap once they are loaded.
	defer btf.FlushKernelSpec()
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, loadError("remove the memlock limit", err)
	}
	spec, err := loadDirtytrack()
	if err != nil {
		return nil, loadError("parse the eBPF object", err)
	}
	spec.Maps["watched"].MaxEntries = opts.MaxWatched
	spec.Maps["counts"].MaxEntries = opts.MaxWatched
	spec.Maps["wakes"].MaxEntries = opts.MaxWatched
	spec.Maps["dirtiers"].MaxEntries = opts.MaxWatched
	spec.Maps["memcgs"].MaxEntries = opts.MaxMemcgs
	spec.Maps["inodes"].MaxEntries = opts.MaxInodes
	spec.Maps["recent"].MaxEntries = opts.MaxRecent
	spec.Maps["events"].MaxEntries = opts.RingBytes
	spec.Maps["wakeups"].MaxEntries = opts.WakeRingBytes

	t := &Tracker{
		opts:   opts,
		out:    make(chan Event, opts.EventBuffer),
		done:   make(chan struct{}),
		slots:  make(map[uint64]uint32),
		wakes:  make(map[uint32]dirtytrackWake),
		gone:   make(map[uint64]bool),
		mounts: make(map[uint64]string),
	}
	for s := range opts.MaxWatched {
		t.free = append(t.free, s)
	}

	// The folio program and the maps first: without them there is no
	// tracker. The others are loaded apart, on the same maps, so that a
	// kernel refusing them loses only what they give: mkdir/rmdir events,
	// and the count of dirty folios truncated (ext4's tracepoint, in a
	// module on many kernels).
	cgroupProgs := takePrograms(spec, "cgroup_mkdir", "cgroup_rmdir")
	cancelProgs := takePrograms(spec, "invalidate_folio")
	levelProgs := takePrograms(spec, "clear_dirty_for_io", "start_writeback", "end_writeback", "account_cleaned")
	if err := spec.LoadAndAssign(&t.objs, nil); err != nil {
		return nil, loadError("load the eBPF program", err)
	}
	fail := func(what string, err error) (*Tracker, error) {
		t.closeAll()
		return nil, loadError(what, err)
	}
	l, err := link.AttachTracing(link.TracingOptions{Program: t.objs.DirtyFolio, AttachType: ebpf.AttachTraceRawTp})
	if err != nil {
		return fail("attach tp_btf/writeback_dirty_folio", err)
	}
	t.links = append(t.links, l)

	if err := t.attachPrograms(spec, cgroupProgs); err != nil {
		opts.Logger.Warn("dirty tracker: no cgroup mkdir/rmdir events; new cgroups are found by scans only", "err", err)
	} else {
		t.cgroupEvents = true
	}
	if err := t.attachPrograms(spec, cancelProgs); err != nil {
		opts.Logger.Warn("dirty tracker: truncated dirty pages are not counted; a deleted dirty file reads as written", "err", err)
	} else {
		t.cancels = true
	}
	if !opts.Levels {
		t.levelsOff = "not asked for (Options.Levels)"
	} else if err := t.attachPrograms(spec, levelProgs); err != nil {
		why := ""
		if errors.Is(err, os.ErrPermission) {
			// The folio program loaded with the same privileges: the
			// kernel forbids these program types, not the process.
			why = " (the kernel refuses fentry programs though it loaded the tracepoint ones: a locked-down kernel, or one built without trampolines; cilium/ebpf's MEMLOCK wording is misleading)"
		}
		t.levelsOff = fmt.Sprintf("the level programs (fentry and fexit) did not load or attach: %v%s", err, why)
		opts.Logger.Info("dirty tracker: no dirty+writeback level counts; memory.stat is read for them", "reason", t.levelsOff)
	} else {
		t.levels = true
	}
	if t.view, err = mapCounts(t.objs.Counts, opts.MaxWatched); err != nil {
		opts.Logger.Warn("dirty tracker: the counters are looked up, not mapped", "err", err)
	}

	for _, m := range []*ebpf.Map{t.objs.Wakeups, t.objs.Events} {
		r, err := openRing(m)
		if err != nil {
			return fail("open a ring buffer", err)
		}
		t.rings = append(t.rings, r)
	}
	t.loadTime = time.Since(start)
	for _, r := range t.rings {
		t.wg.Add(1)
		go t.readEvents(r)
	}
	return t, nil
}

// takePrograms removes the programs named from spec and returns them.
func takePrograms(spec *ebpf.CollectionSpec, names ...string) map[string]*ebpf.ProgramSpec {
	progs := map[string]*ebpf.ProgramSpec{}
	for _, name := range names {
		progs[name] = spec.Programs[name]
		delete(spec.Programs, name)
	}
	return progs
}

// attachPrograms loads progs on the maps already created and attaches
// them.
func (t *Tracker) attachPrograms(spec *ebpf.CollectionSpec, progs map[string]*ebpf.ProgramSpec) error {
	cs := &ebpf.CollectionSpec{
		Maps:      map[string]*ebpf.MapSpec{},
		Programs:  progs,
		Types:     spec.Types,
		ByteOrder: spec.ByteOrder,
	}
	repl := map[string]*ebpf.Map{}
	for name, m := range t.maps() {
		cs.Maps[name] = spec.Maps[name]
		repl[name] = m
	}
	coll, err := ebpf.NewCollectionWithOptions(cs, ebpf.CollectionOptions{MapReplacements: repl})
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	var links []link.Link
	for name, p := range coll.Programs {
		l, err := link.AttachTracing(link.TracingOptions{Program: p, AttachType: progs[name].AttachType})
		if err != nil {
			for _, l := range links {
				l.Close()
			}
			coll.Close()
			return fmt.Errorf("attach %s: %w", name, err)
		}
		links = append(links, l)
	}
	// The links hold the programs; the collection's own references go.
	coll.Close()
	t.links = append(t.links, links...)
	return nil
}

// maps are the loaded maps by their names in bpf/dirtytrack.c.
func (t *Tracker) maps() map[string]*ebpf.Map {
	m := t.objs.dirtytrackMaps
	return map[string]*ebpf.Map{
		"config": m.Config, "counts": m.Counts, "dirtiers": m.Dirtiers, "events": m.Events,
		"inodes": m.Inodes, "memcgs": m.Memcgs, "recent": m.Recent, "stats": m.Stats,
		"wakes": m.Wakes, "wakeups": m.Wakeups, "watched": m.Watched,
	}
}

// loadError wraps err in ErrUnavailable with the likely cause.
func loadError(what string, err error) error {
	return fmt.Errorf("%w: %s: %w%s", ErrUnavailable, what, err, hint(err))
}

// hint names the likely cause of a load error.
func hint(err error) string {
	if _, serr := os.Stat("/sys/kernel/btf/vmlinux"); serr != nil {
		return " (the kernel has no BTF: /sys/kernel/btf/vmlinux is missing; it needs CONFIG_DEBUG_INFO_BTF)"
	}
	if b, lerr := os.ReadFile("/sys/kernel/security/lockdown"); lerr == nil && strings.Contains(string(b), "[confidentiality]") {
		return " (kernel lockdown is in confidentiality mode, which forbids eBPF reads of kernel memory)"
	}
	if errors.Is(err, os.ErrPermission) {
		// cilium/ebpf blames RLIMIT_MEMLOCK for any EPERM; on 5.11+
		// kernels the limit no longer applies and the cause is a
		// capability.
		return " (the process needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN; a message about MEMLOCK is misleading on kernels since 5.11)"
	}
	return ""
}

// CgroupEvents reports whether mkdir and rmdir events are delivered.
func (t *Tracker) CgroupEvents() bool { return t.cgroupEvents }

// CountsCancels reports whether Counts.Cancelled is counted: the ext4
// tracepoint it needs attached.
func (t *Tracker) CountsCancels() bool { return t.cancels }

// NoLevels says why Counts.Level is not counted, "" when it is.
func (t *Tracker) NoLevels() string { return t.levelsOff }

// LoadTime is how long Load took to load and attach the programs.
func (t *Tracker) LoadTime() time.Duration { return t.loadTime }

// Watch starts counting the bytes dirtied in the subtree of the memory
// cgroup id (its own folios and its descendants'), and arms a wake-up: one
// Event once the count exceeds wakeAbove (Never: no wake-up). The count
// starts at 0 on the first Watch and is kept by later ones, which only
// re-arm: a wake-up is sent once per Watch call. Wake-ups are thus
// requested by the daemon, never a storm. A threshold already passed fires
// at the subtree's next dirtied folio, not at once: to be woken after delta
// more bytes, arm Dirtied(id) + delta.
func (t *Tracker) Watch(id, wakeAbove uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errors.New("dirtytrack: watch: tracker closed")
	}
	slot, ok := t.slots[id]
	if ok {
		if err := t.rearm(slot, func(w *dirtytrackWake, seq uint64) { w.Above, w.Seq = wakeAbove, seq }); err != nil {
			return fmt.Errorf("dirtytrack: watch cgroup %d: set wake-up: %w", id, err)
		}
		return nil
	}
	t.seq++
	if len(t.free) == 0 {
		return fmt.Errorf("dirtytrack: watch cgroup %d: %w (%d)", id, ErrTooManyWatched, t.opts.MaxWatched)
	}
	slot = t.free[0]
	// Counts and wake-up first, then the id -> slot entry and the
	// generation that makes the program see it.
	if err := t.objs.Counts.Put(slot, dirtytrackCount{}); err != nil {
		return fmt.Errorf("dirtytrack: watch cgroup %d: reset count: %w", id, err)
	}
	if err := t.objs.Dirtiers.Put(slot, dirtytrackDirtiers{}); err != nil {
		return fmt.Errorf("dirtytrack: watch cgroup %d: reset dirtiers: %w", id, err)
	}
	if err := t.putWake(slot, dirtytrackWake{Above: wakeAbove, Seq: t.seq, Id: id}); err != nil {
		return fmt.Errorf("dirtytrack: watch cgroup %d: set wake-up: %w", id, err)
	}
	if err := t.objs.Watched.Put(id, slot); err != nil {
		return fmt.Errorf("dirtytrack: watch cgroup %d: %w", id, err)
	}
	t.free = t.free[1:]
	t.slots[id] = slot
	delete(t.gone, id)
	return t.bumpGen()
}

// Unwatch stops counting for id and deletes its map entries and its inode
// records. It is a no-op for a cgroup not watched. Removed cgroups are
// unwatched by the tracker itself when it sees their rmdir.
func (t *Tracker) Unwatch(id uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.unwatch(id)
}

func (t *Tracker) unwatch(id uint64) error {
	t.gone[id] = true
	slot, ok := t.slots[id]
	if !ok || t.closed {
		return nil
	}
	delete(t.slots, id)
	var errs []error
	if err := t.objs.Watched.Delete(id); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		errs = append(errs, err)
	}
	// The dirtier and level reports are disarmed by setting their
	// armings to the ones that fired last.
	var d dirtytrackDirtiers
	if err := t.objs.Dirtiers.Lookup(slot, &d); err != nil {
		errs = append(errs, err)
	}
	var c dirtytrackCount
	if err := t.objs.Counts.Lookup(slot, &c); err != nil {
		errs = append(errs, err)
	}
	if err := t.putWake(slot, dirtytrackWake{Above: Never, DirtierSeq: d.Fired, LevelSeq: c.LevelFired}); err != nil {
		errs = append(errs, err)
	}
	delete(t.wakes, slot)
	if err := t.bumpGen(); err != nil {
		errs = append(errs, err)
	}
	for i := range uint32(recentLen) {
		if err := t.objs.Recent.Delete(dirtytrackRecentKey{Id: id, Idx: i}); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, err)
		}
	}
	// A program that read the old generation may still add to the slot
	// for a moment: reuse it last.
	t.free = append(t.free, slot)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dirtytrack: unwatch cgroup %d: %w", id, err)
	}
	return nil
}

// rearm changes slot's wake-up entry by set, which arms what it changes
// with a new sequence number, and writes it. t.mu is held.
func (t *Tracker) rearm(slot uint32, set func(w *dirtytrackWake, seq uint64)) error {
	t.seq++
	w := t.wakes[slot]
	set(&w, t.seq)
	return t.putWake(slot, w)
}

// putWake writes slot's wake-up entry. t.mu is held.
func (t *Tracker) putWake(slot uint32, w dirtytrackWake) error {
	if err := t.objs.Wakes.Put(slot, w); err != nil {
		return err
	}
	t.wakes[slot] = w
	return nil
}

// bumpGen makes the program recompute every memcg's watched ancestors.
func (t *Tracker) bumpGen() error {
	t.gen++
	if err := t.objs.Config.Put(uint32(0), dirtytrackConfig{Gen: t.gen}); err != nil {
		return fmt.Errorf("dirtytrack: set generation: %w", err)
	}
	return nil
}

// Dirtied returns the bytes dirtied in the subtree of the watched cgroup id
// since it was first watched. Like memory.stat, a partial write dirties a
// whole folio (up to 2 MiB on ext4 with large folios).
func (t *Tracker) Dirtied(id uint64) (uint64, error) {
	c, err := t.Counts(id)
	return c.Dirtied, err
}

// Watched returns how many cgroups are watched.
func (t *Tracker) Watched() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.slots)
}

// Stats are the program's own counters, summed over CPUs.
type Stats struct {
	// Walks is how often a memcg's watched ancestors were computed.
	Walks uint64
	// Overflows counts memcgs with more watched ancestors than the
	// program follows (16).
	Overflows uint64
	// WakeRetries counts wake-ups that found their ring full and were
	// retried at a later folio.
	WakeRetries uint64
	// Dropped counts cgroup events lost to a full ring buffer.
	Dropped uint64
	// NoMemcg counts dirtied folios charged to no memcg.
	NoMemcg uint64
}

// Stats reads the program's counters.
func (t *Tracker) Stats() (Stats, error) {
	var out [5]uint64
	for i := range out {
		var per []uint64
		if err := t.objs.Stats.Lookup(uint32(i), &per); err != nil {
			return Stats{}, fmt.Errorf("dirtytrack: stats: %w", err)
		}
		for _, v := range per {
			out[i] += v
		}
	}
	return Stats{Walks: out[0], Overflows: out[1], WakeRetries: out[2], Dropped: out[3], NoMemcg: out[4]}, nil
}

// MapBytes returns the memory the kernel reports for the tracker's maps
// (bpf_map_info's memlock), charged to the loading process's memcg.
func (t *Tracker) MapBytes() (uint64, error) {
	var sum uint64
	for _, m := range []*ebpf.Map{t.objs.Watched, t.objs.Counts, t.objs.Wakes, t.objs.Dirtiers, t.objs.Config, t.objs.Memcgs, t.objs.Inodes, t.objs.Recent, t.objs.Stats, t.objs.Wakeups, t.objs.Events} {
		info, err := m.Info()
		if err != nil {
			return 0, fmt.Errorf("dirtytrack: map info: %w", err)
		}
		b, ok := info.Memlock()
		if !ok {
			return 0, fmt.Errorf("dirtytrack: map %s: the kernel reports no memlock", info.Name)
		}
		sum += b
	}
	return sum, nil
}

// FolioProgramStats returns how often the folio program ran and its total
// run time. The kernel counts only while BPF run-time statistics are
// enabled (ebpf.EnableStats with BPF_STATS_RUN_TIME, or the
// kernel.bpf_stats_enabled sysctl); docs/tracker.md uses it for the cost
// per folio.
func (t *Tracker) FolioProgramStats() (runs uint64, total time.Duration, err error) {
	st, err := t.objs.DirtyFolio.Stats()
	if err != nil {
		return 0, 0, fmt.Errorf("dirtytrack: program stats: %w", err)
	}
	return st.RunCount, st.Runtime, nil
}

// Close detaches the programs, frees the maps and closes Events.
func (t *Tracker) Close() error {
	t.closeMu.Do(func() {
		t.mu.Lock()
		t.closed = true
		t.mu.Unlock()
		close(t.done)
		for _, r := range t.rings {
			r.close()
		}
		t.wg.Wait()
		close(t.out)
		t.closeAll()
	})
	return nil
}

func (t *Tracker) closeAll() {
	for _, l := range t.links {
		l.Close()
	}
	t.links = nil
	t.view.close()
	t.view = countsView{}
	t.objs.Close()
}
