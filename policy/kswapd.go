package policy

import (
	"time"

	"github.com/memcgd/memcgd/memcg"
)

// Seed 001's per-cgroup kswapd, in userspace.
//
// The seed's kswapd wakes when free (limit - usage) drops below low_wmark
// and reclaims until free reaches high_wmark; then it sleeps, and free is
// left between high and whatever the cgroup's tasks charge next. A test
// that fills a cgroup to its limit sees the cgroup held at limit - high,
// no lower.
//
// The userspace kswapd sees the cgroup only when it looks, so it
// anticipates growth: it wakes once free would fall below low within the
// horizon (Input.Reaction plus Input.ActiveInterval) at the recent growth
// rate, and, while the cgroup grows, it looks again before growth takes
// free from where a step leaves it down to min_wmark, the seed's floor
// below which its allocator reclaims in the task (kswapdLook). Growth
// moves the wake-up and the looks earlier, never the end of a run: every
// run stops at high_wmark. A target raised by the growth expected over
// the horizon ends the run that far past high whenever the tasks stop
// charging, which a filled cgroup's last run always does.
//
// What high_wmark leaves for the tasks to charge between two looks is
// then all the kswapd has to absorb its reaction: the seed's watermarks
// are sized for a kswapd in the kernel, woken at low by the charge
// itself. A writer that charges more than high_wmark within a look (a
// thawed writer at 1.5 GB/s charges the 1.9 MiB of a 100 MiB cgroup's in
// about a millisecond) reaches the limit, where the kernel reclaims in
// the writer; a larger min_free_kbytes gives the userspace kswapd room.
//
// Each step asks for no more than what is left to high_wmark, and the
// next step looks again before asking more. The kernel may reclaim more
// than it is asked (Documentation/admin-guide/cgroup-v2.rst,
// memory.reclaim), by its batch at least (try_to_free_mem_cgroup_pages
// reclaims max(nr_pages, SWAP_CLUSTER_MAX) pages); the driver's reclaim
// comes to the request in steps of its own, each at most half of what is
// left but the last, that re-read usage between them (cgroupfs/act
// reclaim), so a run ends within ReclaimGranule of high_wmark.

// ReclaimGranule is the least the kernel reclaims in one call of
// try_to_free_mem_cgroup_pages (mm/vmscan.c: nr_to_reclaim =
// max(nr_pages, SWAP_CLUSTER_MAX)), SWAP_CLUSTER_MAX pages: the
// granularity of a run's end, by which it may pass high_wmark.
const ReclaimGranule = 32 * memcg.PageSize

// kswapd runs seed 001's kswapd for one observation: it wakes, goes on,
// or ends a run, and sets d.Reclaim, d.ReclaimStart and, at the end of a
// run, d.ReclaimOvershoot. stale reports an observation read before the
// latest reclaim completed: it does not show what that reclaim freed, so
// nothing is decided on it (the driver looks again at once, timing.go).
func (c *Controller) kswapd(in Input, free, ahead uint64, d *Decision) (stale bool) {
	w := in.Watermarks
	if !in.backgroundReclaim() {
		c.reclaiming, c.passReclaimed = false, false
		return false
	}
	if in.Now.Before(c.reclaimDoneAt) {
		if c.reclaiming {
			d.Why |= ReasonWatermark
		}
		return true
	}
	switch {
	case free >= w.High:
		if c.reclaiming && c.passReclaimed {
			d.ReclaimOvershoot = free - w.High
		}
		c.reclaiming, c.passReclaimed = false, false
	case free < kswapdWake(w, ahead):
		d.ReclaimStart = !c.reclaiming
		c.reclaiming = true
	}
	if c.reclaiming {
		// What is left to high_wmark, in whole pages (the unit of the
		// kernel's reclaim and of a v1 limit), and no more: the growth
		// until the next step is the next step's to reclaim.
		d.Reclaim = (w.High - free + memcg.PageSize - 1) &^ (memcg.PageSize - 1)
		d.Why |= ReasonWatermark
	}
	return false
}

// kswapdWake is the free memory below which the userspace kswapd wakes:
// low_wmark raised by the growth expected over the horizon, so that free
// is still above low when the next step comes, and at most high_wmark,
// where a run would end at once.
func kswapdWake(w memcg.Watermarks, ahead uint64) uint64 {
	return min(satAdd(w.Low, ahead), w.High)
}

// kswapdLook is how soon a growing cgroup must be looked at again so that
// the look comes before its growth takes free below min_wmark, counted
// from this observation: from the free memory the step leaves (free plus
// what it reclaims), at the recent growth rate, less the reaction delay.
// ok is false when that is no sooner than the active interval, sooner
// than MinLook, or the cgroup does not grow.
func (c *Controller) kswapdLook(in Input, free uint64, d *Decision) (t time.Duration, ok bool) {
	w := in.Watermarks
	if !in.backgroundReclaim() || c.growth <= 0 {
		return 0, false
	}
	left := satAdd(free, d.Reclaim)
	t = time.Duration(float64(sat(left, w.Min))/c.growth*float64(time.Second)) - in.Reaction
	if t >= in.activeInterval() || t < MinLook {
		// Slow growth: the active interval's look is soon enough. Growth
		// too fast for the looks to keep ahead of (high_wmark charged in
		// less than a look): looks at the floor would cost the CPU the
		// writer runs on and still come late, and the kernel reclaims at
		// the limit, as it does when the seed's kswapd falls behind.
		return 0, false
	}
	return t, true
}
