package kernel

import "testing"

type anonHog struct{ pages, got int64 }

func (a *anonHog) Step(k *Kernel, t *Task) bool {
	a.got += k.AllocAnon(t, a.pages-a.got)
	return a.got >= a.pages
}

// mm/memcontrol.c: memory.high never fails a charge; page cache over high
// is reclaimed by the charging task, and anonymous memory that cannot be
// reclaimed (no swap) makes the task sleep a penalty.
func TestMemoryHigh(t *testing.T) {
	k := testKernel(t, 2, Options{})
	f := k.NewMemcg(0, "/file", -1, 32<<20)
	a := k.NewMemcg(0, "/anon", -1, 32<<20)
	writer := k.NewTask("w", f, &seqWriter{ino: int64(k.NewInode(0)), pages: 64 << 8, block: 4}, 0)
	hog := k.NewTask("a", a, &anonHog{pages: 40 << 8}, 0)
	k.Run(600 * Second)
	if !writer.Done() || !hog.Done() {
		t.Fatalf("tasks not done by %v", k.Now())
	}
	// The writer's usage stays near high (the overage it may build before
	// returning to user mode is one batch per check).
	if u := k.memcgs[f].usage * PageSize; u > 34<<20 {
		t.Errorf("file cgroup usage %d MiB over high 32M", u>>20)
	}
	if k.memcgs[f].ev[meEventsHigh] == 0 || k.memcgs[f].hev[mePgstealDirect] == 0 {
		t.Errorf("file cgroup: %d high events, %d pages reclaimed: want reclaim over high", k.memcgs[f].ev[meEventsHigh], k.memcgs[f].hev[mePgstealDirect])
	}
	// 40M of anon under high 32M: all charged, with penalty sleeps.
	if u := k.memcgs[a].usage * PageSize; u < 40<<20 {
		t.Errorf("anon cgroup usage %d MiB: memory.high must not fail charges", u>>20)
	}
	if hog.Stall < 10*Millisecond {
		t.Errorf("anon hog stalled %v: want memory.high penalties", hog.Stall)
	}
}

// mm/vmscan.c, mm/page_alloc.c: when free memory falls below the low
// watermark kswapd reclaims to the high one; the writer's allocations dip
// below min only if kswapd cannot keep up.
func TestGlobalReclaim(t *testing.T) {
	k := testKernel(t, 1, Options{})
	// 4G machine; write 8G from the root: memory must be recycled.
	w := k.NewTask("w", 0, &seqWriter{ino: int64(k.NewInode(0)), pages: 8 << 18, block: 16}, 0)
	minFree := k.node.free()
	k.Every(0, Millisecond, func(k *Kernel) { minFree = min(minFree, k.node.free()) })
	k.Run(600 * Second)
	if !w.Done() {
		t.Fatalf("writer not done by %v", k.Now())
	}
	vs := map[string]int64{}
	for _, l := range k.Vmstat() {
		vs[l.Name] = l.Value
	}
	if vs["pgsteal_kswapd"] == 0 || vs["pageoutrun"] == 0 {
		t.Errorf("kswapd reclaimed %d pages in %d runs: want background reclaim", vs["pgsteal_kswapd"], vs["pageoutrun"])
	}
	if minFree < k.node.wmarkMin/2 {
		t.Errorf("free fell to %d pages, under half the min watermark %d", minFree, k.node.wmarkMin)
	}
	// Dirty pages stay under the global limit.
	_, thresh := k.globalDirtyLimits()
	if d := k.memcgs[0].hstat[msFileDirty] + k.memcgs[0].hstat[msFileWriteback]; d > thresh+thresh/10 {
		t.Errorf("dirty+writeback %d pages over the global limit %d", d, thresh)
	}
}
