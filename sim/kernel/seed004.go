package kernel

import "github.com/memcgd/memcgd/memcg"

// Seed 004: Andrea Righi, "memcg: per cgroup dirty limit" (v7, 2010, not
// merged). Each cgroup gets memory.dirty_ratio/bytes and
// memory.dirty_background_ratio/bytes; balance_dirty_pages() throttles a
// writer against its cgroup's limit as well as the global one, and write-
// out of the cgroup's files starts past its background threshold. The
// cgroup's dirtyable memory is its file pages plus its free space, "at the
// minimum free pages of all its parents" (the v7 changelog). The model
// evaluates it as a memcg dirty domain in balance_dirty_pages, on v1 as on
// v2, with bytes meaning the cgroup's own bytes.

// Seed004 is the per-memcg dirty limit option.
type Seed004 struct{}

// seed004MaxDepth bounds the chain walked (cgroups below the root).
const seed004MaxDepth = 16

// seed004Level is one cgroup of the chain seed 004 walks, in pages: its
// file pages, its free space under its limit (the machine's free memory
// when it has none), and its knobs.
type seed004Level struct {
	file, free int64
	knobs      *memcg.Knobs
}

// seed004Limits is the pair that governs the last cgroup of chain (the
// topmost cgroup below the root first): each cgroup's thresholds over its
// own dirtyable memory, file + the least free space of it and its
// ancestors, from its own knobs as domain_dirty_limits() reads the vm
// sysctls; then the smallest of each, since a cgroup's limit is never
// above an ancestor's, and a background threshold at or above the limit
// becomes half of it.
func seed004Limits(chain []seed004Level) (bg, thresh int64) {
	if len(chain) == 0 {
		return noLimit, noLimit
	}
	bg, thresh = noLimit, noLimit
	headroom := noLimit
	for i := range chain {
		headroom = min(headroom, chain[i].free)
		d := dirtyThrottleControl{avail: chain[i].file + headroom}
		domainDirtyLimits(&d, nil, chain[i].knobs)
		thresh = min(thresh, d.thresh)
		bg = min(bg, d.bgThresh)
	}
	if bg >= thresh {
		bg = thresh / 2
	}
	return bg, thresh
}

// limits returns m's effective background and dirty thresholds in pages.
func (o *Seed004) limits(k *Kernel, m int32) (bg, thresh int64) {
	var up [seed004MaxDepth]int32
	n := 0
	for c := m; c != nilIdx && k.memcgs[c].parent != nilIdx && n < len(up); c = k.memcgs[c].parent {
		up[n] = c
		n++
	}
	var chain [seed004MaxDepth]seed004Level
	for i := 0; i < n; i++ {
		c := &k.memcgs[up[n-1-i]]
		free := max(k.node.free(), 0) // an unlimited cgroup's headroom is the machine's free memory
		if c.max < noLimit {
			free = c.max - min(c.max, c.usage)
		}
		chain[i] = seed004Level{file: c.hstat[msInactiveFile] + c.hstat[msActiveFile], free: free, knobs: &c.Knobs}
	}
	return seed004Limits(chain[:n])
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
