package kernel

// The page allocator's side of reclaim (mm/page_alloc.c): one node with one
// zone, its watermarks sized from min_free_kbytes, kswapd woken below the
// low watermark and direct reclaim below the min one.

// PageShift is PAGE_SHIFT on x86-64; PageSize the page in bytes.
const (
	PageShift = 12
	PageSize  = 1 << PageShift
)

// noLimit is a page count no cgroup reaches (PAGE_COUNTER_MAX).
const noLimit int64 = 1 << 62

type node struct {
	managed   int64 // zone_managed_pages
	reserved  int64 // pages the kernel itself holds
	filePages int64
	anonPages int64

	minFreeKbytes                 int64
	wmarkMin, wmarkLow, wmarkHigh int64
	totalreservePages             int64
	kswapdQueued, kswapdAwake     bool
	pgdatWriteback                bool
	nrWritebackThrottled          int64
	nrReclaimStart                int64
	throttledTasks                []int32
	vmstat                        [nrVmstat]int64
	directRetries                 int
	memcgFirst                    int64    // seed 000 flushes that replaced a full flush
	wbStartAll                    [8]int64 // wb_start_writeback requests by reason
	throttledKswapds              []int32  // seed 001 threads waiting on writeback
}

// free is NR_FREE_PAGES.
func (n *node) free() int64 { return n.managed - n.reserved - n.filePages - n.anonPages }

// DefaultMinFreeKbytes is init_per_zone_wmark_min(): int_sqrt(lowmem_kbytes
// * 16), clamped to [128, 262144].
func DefaultMinFreeKbytes(pages int64) int64 {
	kb := pages * (PageSize >> 10)
	return min(max(int64(isqrt(uint64(kb*16))), 128), 262144)
}

// setupWatermarks is __setup_per_zone_wmarks() for the one zone:
// min = min_free_kbytes in pages, low = min + max(min/4, managed *
// watermark_scale_factor / 10000), high = low + the same step; and
// calculate_totalreserve_pages() (no lowmem reserve with one zone).
func (n *node) setupWatermarks(minFreeKbytes, scaleFactor int64) {
	n.minFreeKbytes = minFreeKbytes
	n.wmarkMin = minFreeKbytes >> (PageShift - 10)
	tmp := max(n.wmarkMin>>2, n.managed*scaleFactor/10000)
	n.wmarkLow = n.wmarkMin + tmp
	n.wmarkHigh = n.wmarkLow + tmp
	n.totalreservePages = min(n.wmarkHigh, n.managed)
}

// allocPages takes n pages for task t: the fast path at the low watermark
// wakes kswapd when it fails, the slow path at the min watermark reclaims
// directly. It returns false if t must sleep first.
func (k *Kernel) allocPages(t *Task, n int64) bool {
	nd := &k.node
	if nd.free()-n >= nd.wmarkLow {
		return true
	}
	k.wakeupKswapd(t.clock)
	if nd.free()-n >= nd.wmarkMin {
		return true
	}
	sc := scanControl{nrToReclaim: SwapClusterMax, target: nilIdx, task: t}
	k.tryToFreePages(t, &sc)
	if sc.nrReclaimed > 0 {
		nd.directRetries = 0
		return true
	}
	// should_reclaim_retry(): give up after MAX_RECLAIM_RETRIES rounds
	// without progress. The model has no OOM killer: past that it lets
	// the allocation dip into the reserves, and sleeps a jiffy between
	// tries as reclaim_throttle(NOPROGRESS) does.
	nd.directRetries++
	if nd.directRetries > MaxReclaimRetries || nd.free() > n {
		nd.directRetries = 0
		return true
	}
	k.sleep(t, t.clock+Millisecond, StopReclaim)
	return false
}
