package kernel

import "github.com/memcgd/memcgd/memcg"

// Seed 004: Andrea Righi, "memcg: per cgroup dirty limit" (v7, 2010, not
// merged). Each cgroup gets memory.dirty_ratio/bytes and
// memory.dirty_background_ratio/bytes; balance_dirty_pages() throttles a
// writer against its cgroup's limit as well as the global one, and write-
// out of the cgroup's files starts past its background threshold. The
// cgroup's dirtyable memory is its file pages plus its free space, "at the
// minimum free pages of all its parents" (memcg.EffectiveDirtyLimits).
// The model evaluates it as a memcg dirty domain in balance_dirty_pages,
// on v1 as on v2, with bytes meaning the cgroup's own bytes.

// Seed004 is the per-memcg dirty limit option.
type Seed004 struct{}

// limits returns m's effective background and dirty thresholds in pages.
func (o *Seed004) limits(k *Kernel, m int32) (bg, thresh int64) {
	k.chainStat = k.chainStat[:0]
	k.chainKnobs = k.chainKnobs[:0]
	var chain [16]int32
	n := 0
	for c := m; c != nilIdx && k.memcgs[c].parent != nilIdx && n < len(chain); c = k.memcgs[c].parent {
		chain[n] = c
		n++
	}
	for i := n - 1; i >= 0; i-- {
		c := &k.memcgs[chain[i]]
		s := memcg.Stat{Usage: uint64(c.usage) * PageSize, Limit: memcg.NoLimit,
			File: uint64(c.hstat[msInactiveFile]+c.hstat[msActiveFile]) * PageSize}
		if c.max < noLimit {
			s.Limit = uint64(c.max) * PageSize
		}
		if s.Limit == memcg.NoLimit {
			// An unlimited cgroup's headroom is the machine's free memory.
			s.Limit = s.Usage + uint64(max(k.node.free(), 0))*PageSize
		}
		k.chainStat = append(k.chainStat, s)
		k.chainKnobs = append(k.chainKnobs, c.Knobs)
	}
	if n == 0 {
		return noLimit, noLimit
	}
	d := memcg.EffectiveDirtyLimits(k.chainStat, k.chainKnobs)
	if d.Limit == memcg.NoLimit {
		return noLimit, noLimit
	}
	return int64(d.Background / PageSize), int64(d.Limit / PageSize)
}

// background starts write-out of m's files once its dirty pages pass its
// background threshold.
func (o *Seed004) background(k *Kernel, m int32) {
	for c := m; c != nilIdx && k.memcgs[c].parent != nilIdx; c = k.memcgs[c].parent {
		x := &k.memcgs[c]
		if x.bgWriteout {
			continue
		}
		bg, _ := o.limits(k, c)
		if x.hstat[msFileDirty] > bg {
			x.bgWriteout = true
			if k.WriteoutMemcg(c, WBReasonBackground, true) == 0 {
				x.bgWriteout = false
			}
		}
	}
}

// overBg reports whether m is still over its background threshold.
func (o *Seed004) overBg(k *Kernel, m int32) bool {
	if o == nil {
		return true
	}
	bg, _ := o.limits(k, m)
	return k.memcgs[m].hstat[msFileDirty] > bg
}
