package cgroupfs

import (
	"math"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// The tracker's level count (dirtytrack.Counts.Level) moves from 0 at a
// cgroup's watch, as memory.stat's dirty+writeback moves; memory.stat says
// where it stands. An observation anchors the count to memory.stat
// (anchorLevel), and a level wake-up (host.Wake.LevelAbove, LevelBelow)
// is armed on the count, less the anchor.

// levelDrift is how far memory.stat may stand from the anchored count
// before it is anchored again: memory.stat's per-CPU batches and a read
// that raced a write move it by a few MiB; a count that missed a kernel
// path (a v1 charge moved with a task) would move it for good.
const levelDrift = 8 << 20

// anchorLevel anchors cg's level count to stat, memory.stat's
// dirty+writeback read a moment before, unless it is anchored already and
// within levelDrift of it. Only a cgroup the tracker counts, on a kernel
// that runs the level programs, is anchored.
func (f *fastPath) anchorLevel(cg host.Cgroup, stat uint64) {
	if f.tr == nil || !f.tr.CountsLevels() {
		return
	}
	f.mu.Lock()
	id, ok := f.ids[cg]
	counted := ok && f.counted[id]
	f.mu.Unlock()
	if !counted {
		return
	}
	n, err := f.tr.Counts(id)
	if err != nil {
		return
	}
	want := int64(stat) - n.Level
	f.mu.Lock()
	defer f.mu.Unlock()
	if a, ok := f.anchors[id]; ok && abs(a-want) <= levelDrift {
		return
	}
	f.anchors[id] = want
}

// armLevel arms cg's level report at above and below, absolute bytes of
// dirty+writeback (memcg.NoLimit and 0: off), converted to the count by
// cg's anchor. A cgroup not yet anchored is armed at none: the caller
// looks at it by its own schedule until an observation anchors it.
func (f *fastPath) armLevel(cg host.Cgroup, above, below uint64) error {
	id, err := f.count(cg)
	if err != nil {
		return err
	}
	f.mu.Lock()
	anchor, ok := f.anchors[id]
	f.mu.Unlock()
	hi, lo := int64(math.MaxInt64), int64(math.MinInt64)
	if ok && above != memcg.NoLimit && above != 0 {
		hi = int64(min(above, math.MaxInt64)) - anchor
	}
	if ok && below != 0 {
		lo = int64(min(below, math.MaxInt64)) - anchor
	}
	return f.tr.ArmLevel(id, hi, lo)
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
