package kernel

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/memcgd/memcgd/memcg"
)

// The event heap pops in (time, scheduling order), whatever the push order.
func TestEventHeapOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h eventHeap
	type key struct {
		at  Time
		seq uint64
	}
	var want []key
	for i := 0; i < 5000; i++ {
		at := Time(r.IntN(100))
		h.push(at, evTask, int32(i), 0)
		want = append(want, key{at, h.seq})
		if i%7 == 0 {
			e := h.pop()
			idx := slices.IndexFunc(want, func(k key) bool { return k.seq == e.seq })
			want = slices.Delete(want, idx, idx+1)
			for _, k := range want {
				if k.at < e.at || (k.at == e.at && k.seq < e.seq) {
					t.Fatalf("popped (%d,%d) before (%d,%d)", e.at, e.seq, k.at, k.seq)
				}
			}
		}
	}
	prev := event{at: -1}
	for h.len() > 0 {
		e := h.pop()
		if e.at < prev.at || (e.at == prev.at && e.seq < prev.seq) {
			t.Fatalf("popped (%d,%d) after (%d,%d)", e.at, e.seq, prev.at, prev.seq)
		}
		prev = e
	}
}

// mm/memcontrol.c calculate_high_delay(): the §3.6 table of the research
// notes, for a 64-page batch over high = 100M.
func TestHighDelay(t *testing.T) {
	k := testKernel(t, 2, Options{})
	m := k.NewMemcg(0, "/a", -1, 100<<20)
	for _, tc := range []struct {
		usageMiB int64
		want     Time
	}{
		{100, 0},
		{101, 6400 * Microsecond},
		{105, 160 * Millisecond},
		{110, 640 * Millisecond},
		{120, 2 * Second}, // MEMCG_MAX_HIGH_DELAY_JIFFIES
	} {
		k.memcgs[m].usage = tc.usageMiB << 20 / PageSize
		got := k.highDelay(m, MemcgChargeBatch)
		if d := got - tc.want; d > tc.want/50+Millisecond || d < -(tc.want/50+Millisecond) {
			t.Errorf("usage %dM: delay %v, want about %v", tc.usageMiB, got, tc.want)
		}
	}
}

// mm/page_alloc.c init_per_zone_wmark_min() and __setup_per_zone_wmarks().
func TestWatermarks(t *testing.T) {
	if got := DefaultMinFreeKbytes(16 << 18); got != 16384 {
		t.Errorf("16 GiB: min_free_kbytes %d, want 16384", got)
	}
	if got := DefaultMinFreeKbytes(64); got != 128 {
		t.Errorf("256 KiB: min_free_kbytes %d, want the floor 128", got)
	}
	var n node
	n.managed = 4 << 18 // 4 GiB
	n.setupWatermarks(8192, 10)
	// min 2048 pages; step max(512, 1048576*10/10000 = 1048) = 1048.
	if n.wmarkMin != 2048 || n.wmarkLow != 3096 || n.wmarkHigh != 4144 {
		t.Errorf("watermarks %d/%d/%d, want 2048/3096/4144", n.wmarkMin, n.wmarkLow, n.wmarkHigh)
	}
}

// Seed 000: "if nothing is writeback, then fallback a full flush": with at
// most MIN_WB_DIRTY_PAGES dirty, the reclaiming cgroup's own write-out
// does not replace the full flush.
func TestSeed000FallsBackAtMinWbDirtyPages(t *testing.T) {
	for _, tc := range []struct {
		dirty int64
		first bool
	}{{0, false}, {MinWbDirtyPages, false}, {MinWbDirtyPages + 1, true}, {4096, true}} {
		k := testKernel(t, 1, Options{Seed000: &Seed000{MinDirtyPages: MinWbDirtyPages}})
		m := k.NewMemcg(0, "/a", 1<<30, -1)
		if tc.dirty > 0 {
			tk := k.NewTask("w", m, nil, 0)
			tk.clock = 0
			ino := k.NewInode(0)
			if got := k.Write(tk, ino, 0, tc.dirty, tc.dirty, 1); got != tc.dirty {
				t.Fatalf("wrote %d of %d pages", got, tc.dirty)
			}
		}
		if got := k.opts.Seed000.flushMemcgFirst(k, m); got != tc.first {
			t.Errorf("%d dirty pages: memcg first %v, want %v", tc.dirty, got, tc.first)
		}
	}
}

// Seed 001: "low_wmark 3663360 / high_wmark 4396032" for a 500M cgroup.
func TestSeed001Watermarks(t *testing.T) {
	k := testKernel(t, 1, Options{Seed001: &Seed001{}})
	m := k.NewMemcg(0, "/A", 500<<20, -1)
	k.SetKnobs(m, memcg.DefaultKnobs())
	if lo, hi := k.memcgs[m].kswapd.low*PageSize, k.memcgs[m].kswapd.high*PageSize; lo != 3663360/PageSize*PageSize || hi != 4396032/PageSize*PageSize {
		t.Errorf("watermarks %d/%d bytes, want the seed's 3663360/4396032 (in whole pages)", lo, hi)
	}
}

// Extents: a sequential writer's pages stay a handful of extents, and
// splits keep the LRU and inode lists consistent.
func TestExtentsStayFewAndConsistent(t *testing.T) {
	k := testKernel(t, 1, Options{})
	m := k.NewMemcg(0, "/a", 64<<20, -1)
	ino := k.NewInode(0)
	tk := k.NewTask("w", m, nil, 0)
	var off int64
	for off < 8192 {
		off += k.Write(tk, ino, off, 8192-off, 4, 1)
		tk.sleeping = false
	}
	if live := len(k.ext) - freeCount(k); live > 4 {
		t.Errorf("%d live extents for 8192 sequential pages, want a handful", live)
	}
	k.startWriteback(ino, 1000)
	k.shrinkInactiveList(m, 100, &scanControl{target: m, nrToReclaim: 32})
	k.endWriteback(ino, 600)
	checkLists(t, k, m)
}

func freeCount(k *Kernel) int {
	n := 0
	for i := k.extFree; i != nilIdx; i = k.ext[i].next {
		n++
	}
	return n
}

func checkLists(t *testing.T, k *Kernel, m int32) {
	t.Helper()
	var lruPages int64
	for l := range k.memcgs[m].lru {
		lst := &k.memcgs[m].lru[l]
		var n int64
		prev := nilIdx
		for i := lst.head; i != nilIdx; i = k.ext[i].next {
			if k.ext[i].prev != prev || int(k.ext[i].lru) != l {
				t.Fatalf("list %d: extent %d has prev %d lru %d, want %d %d", l, i, k.ext[i].prev, k.ext[i].lru, prev, l)
			}
			n += k.ext[i].n
			prev = i
		}
		if lst.tail != prev || n != lst.pages {
			t.Fatalf("list %d: tail %d pages %d, walked %d %d", l, lst.tail, lst.pages, prev, n)
		}
		lruPages += n
	}
	if lruPages != k.memcgs[m].usage-k.memcgs[m].stock {
		t.Errorf("LRU holds %d pages, usage %d (stock %d)", lruPages, k.memcgs[m].usage, k.memcgs[m].stock)
	}
	for ino := range k.inodes {
		in := &k.inodes[ino]
		for _, l := range []*extList{&in.dirty, &in.wback} {
			var n int64
			for i := l.head; i != nilIdx; i = k.ext[i].inext {
				n += k.ext[i].n
			}
			if n != l.pages {
				t.Errorf("inode %d list: %d pages walked, %d counted", ino, n, l.pages)
			}
		}
		if in.dirty.pages*PageSize != int64(k.Stat(m).Dirty) && in.owner == m {
			t.Errorf("inode dirty %d pages, cgroup dirty %d bytes", in.dirty.pages, k.Stat(m).Dirty)
		}
	}
}

func testKernel(t testing.TB, v int, o Options) *Kernel {
	t.Helper()
	k, err := New(Config{CgroupVersion: v, MemoryPages: 4 << 18, VMDirty: memcg.Knobs{DirtyRatio: 20, DirtyBackgroundRatio: 10},
		DirtyExpireInterval: 30 * Second, DirtyWritebackInterval: 5 * Second, WriteCostPerPage: 250, ScanCostPerPage: 50,
		Disks: []DiskConfig{{Name: "vda", WriteBandwidth: 200 << 20, ReadBandwidth: 200 << 20, NrRequests: 32, MaxRequestPages: 128}}}, o)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
