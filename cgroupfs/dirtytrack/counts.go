package dirtytrack

import (
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Counts are a watched cgroup's counters, each of its subtree since it was
// first watched.
type Counts struct {
	// Dirtied is the bytes dirtied (Dirtied).
	Dirtied uint64
	// Cancelled is the bytes of dirty folios dropped unwritten: a
	// truncated or deleted file's, on ext2/3/4 (the ext4 driver's
	// tracepoint). Known when HasCancelled (CountsCancels).
	HasCancelled bool
	Cancelled    uint64
	// Level is how far the subtree's dirty+writeback moved since it was
	// first watched, as memory.stat counts them (v1 total_dirty +
	// total_writeback, v2 file_dirty + file_writeback): the level now
	// less the level then. Known when HasLevel (CountsLevels).
	HasLevel bool
	Level    int64
}

// countsView is the counts map mapped into the daemon's memory
// (BPF_F_MMAPABLE): the counters are read with atomic loads, without a
// system call. Each slot's value is the C struct count, at a stride of its
// size rounded up to 8 bytes (kernel/bpf/arraymap.c, array_map_alloc).
type countsView struct {
	mem    []byte
	stride uintptr
}

// mapCounts maps m, the counts array of entries slots.
func mapCounts(m *ebpf.Map, entries uint32) (countsView, error) {
	stride := (unsafe.Sizeof(dirtytrackCount{}) + 7) &^ 7
	size := int(stride) * int(entries)
	page := os.Getpagesize()
	size = (size + page - 1) &^ (page - 1)
	mem, err := unix.Mmap(m.FD(), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return countsView{}, fmt.Errorf("map the counts array: %w", err)
	}
	return countsView{mem: mem, stride: stride}, nil
}

// load reads a counter of slot at the field offset off.
func (v countsView) load(slot uint32, off uintptr) uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&v.mem[uintptr(slot)*v.stride+off])))
}

// read reads slot's counters; the inode ring's last entry is not read.
func (v countsView) read(slot uint32) dirtytrackCount {
	var c dirtytrackCount
	return dirtytrackCount{
		Dirtied:   v.load(slot, unsafe.Offsetof(c.Dirtied)),
		Cancelled: v.load(slot, unsafe.Offsetof(c.Cancelled)),
		Level:     int64(v.load(slot, unsafe.Offsetof(c.Level))),
		Recent:    v.load(slot, unsafe.Offsetof(c.Recent)),
	}
}

func (v countsView) close() {
	if v.mem != nil {
		unix.Munmap(v.mem)
	}
}

// Counts reads the counters of the watched cgroup id, from the mapped
// array where it could be mapped.
func (t *Tracker) Counts(id uint64) (Counts, error) {
	c, err := t.count(id)
	if err != nil {
		return Counts{}, fmt.Errorf("dirtytrack: counts of cgroup %d: %w", id, err)
	}
	return Counts{Dirtied: c.Dirtied, HasCancelled: t.cancels, Cancelled: c.Cancelled, HasLevel: t.levels, Level: c.Level}, nil
}

// count reads the program's count of the watched cgroup id. It wraps
// ErrNotWatched for a cgroup not watched.
func (t *Tracker) count(id uint64) (dirtytrackCount, error) {
	t.mu.Lock()
	slot, ok := t.slots[id]
	t.mu.Unlock()
	var c dirtytrackCount
	if !ok {
		return c, ErrNotWatched
	}
	if t.view.mem != nil {
		return t.view.read(slot), nil
	}
	// Lookup fills c before c is returned: in "return c, Lookup(&c)" the
	// order of the two is not specified (the Go spec, Order of
	// evaluation).
	err := t.objs.Counts.Lookup(slot, &c)
	return c, err
}

// CountsLevels reports whether Counts.Level is counted: the level
// programs attached (fentry and fexit, which some kernels refuse).
func (t *Tracker) CountsLevels() bool { return t.levels }

// ArmLevel asks for one LevelCrossed event once the watched cgroup id's
// level (Counts.Level) rises above above or falls below below. Like
// Watch's wake-up it is sent once per call.
func (t *Tracker) ArmLevel(id uint64, above, below int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	slot, ok := t.slots[id]
	if !ok {
		return fmt.Errorf("dirtytrack: arm the level report of cgroup %d: %w", id, ErrNotWatched)
	}
	if err := t.rearm(slot, func(w *dirtytrackWake, seq uint64) {
		w.LevelAbove, w.LevelBelow, w.LevelSeq = above, below, seq
	}); err != nil {
		return fmt.Errorf("dirtytrack: arm the level report of cgroup %d: %w", id, err)
	}
	return nil
}
