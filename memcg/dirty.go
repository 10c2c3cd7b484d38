package memcg

// DirtyLimits are a cgroup's two dirty thresholds, in bytes of dirty plus
// writeback page cache.
type DirtyLimits struct {
	// Background is where write-out of the cgroup's files starts.
	Background uint64
	// Limit is where its writers are throttled.
	Limit uint64
}

// Freerun is the level below which writers are never throttled:
// dirty_freerun_ceiling() in mm/page-writeback.c, (thresh + bg_thresh) / 2.
func (d DirtyLimits) Freerun() uint64 {
	return d.Limit/2 + d.Background/2 + (d.Limit & d.Background & 1)
}

// Dirtyable is a cgroup's dirtyable memory, the base its ratios apply to:
// its own file pages plus its headroom under its limit
// (mm/page-writeback.c, mdtc_calc_avail: filepages + min(headroom,
// other_clean)). Anonymous memory is not dirtyable, so anon usage lowers
// the thresholds by eating the headroom. headroom is the smallest free
// space under the limits of the cgroup and its ancestors (see Headroom),
// which bounds it by the machine's memory at the root.
func Dirtyable(file, headroom uint64) uint64 {
	if headroom == NoLimit || file > NoLimit-headroom {
		return NoLimit
	}
	return file + headroom
}

// Headroom is the smallest free space under the limit of any cgroup in
// chain, which runs from the root to the cgroup itself. Seed 004 (v7
// changelog): "evaluate cgroup free pages as at the minimum free pages of
// all its parents"; the kernel's mem_cgroup_wb_stats() walks the same way.
func Headroom(chain []Stat) uint64 {
	h := NoLimit
	for _, s := range chain {
		h = min(h, s.Free())
	}
	return h
}

// DirtyLimits computes the cgroup's own thresholds over dirtyable bytes, as
// domain_dirty_limits() in mm/page-writeback.c does for a domain: bytes
// win over ratios, a ratio applies to dirtyable memory, and a background
// threshold at or above the limit becomes half the limit.
//
// Unlike the v2 kernel, which converts a memcg's bytes into a ratio of
// global memory, bytes here are the cgroup's own, as in seed 004.
func (k Knobs) DirtyLimits(dirtyable uint64) DirtyLimits {
	var d DirtyLimits
	if k.DirtyBytes > 0 {
		d.Limit = roundUpPage(k.DirtyBytes)
	} else {
		d.Limit = ratioOf(k.DirtyRatio, dirtyable)
	}
	if k.DirtyBackgroundBytes > 0 {
		d.Background = roundUpPage(k.DirtyBackgroundBytes)
	} else {
		d.Background = ratioOf(k.DirtyBackgroundRatio, dirtyable)
	}
	if d.Background >= d.Limit {
		d.Background = d.Limit / 2
	}
	return d
}

// ratioOf is pct percent of n bytes, rounded down to a page as the kernel
// computes in pages.
func ratioOf(pct, n uint64) uint64 {
	if n == NoLimit {
		return NoLimit
	}
	pages := n / PageSize
	// The kernel holds the ratio in units where PAGE_SIZE is 100 %
	// (ratio = vm_dirty_ratio * PAGE_SIZE / 100), then thresh = ratio *
	// avail / PAGE_SIZE; the same truncations give the same pages.
	ratio := pct * PageSize / 100
	return ratio * pages / PageSize * PageSize
}

func roundUpPage(n uint64) uint64 {
	if n > NoLimit-(PageSize-1) {
		return NoLimit &^ (PageSize - 1)
	}
	return (n + PageSize - 1) &^ (PageSize - 1)
}

// EffectiveDirtyLimits is the pair that governs the last cgroup of chain
// (root first): each cgroup's thresholds over its own dirtyable memory
// (its headroom taken over its own ancestors), and then the smallest of
// them, since seed 004 keeps a cgroup's limit never above its ancestors'.
// knobs[i] belongs to chain[i].
func EffectiveDirtyLimits(chain []Stat, knobs []Knobs) DirtyLimits {
	eff := DirtyLimits{Background: NoLimit, Limit: NoLimit}
	headroom := NoLimit
	for i, s := range chain {
		headroom = min(headroom, s.Free())
		d := knobs[i].DirtyLimits(Dirtyable(s.File, headroom))
		eff.Limit = min(eff.Limit, d.Limit)
		eff.Background = min(eff.Background, d.Background)
	}
	if eff.Background >= eff.Limit && eff.Limit != NoLimit {
		eff.Background = eff.Limit / 2
	}
	return eff
}
