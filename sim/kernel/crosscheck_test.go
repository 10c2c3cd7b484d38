package kernel_test

// The simulated kernel has its own port of the kernel's dirty-throttling
// and watermark arithmetic (page_writeback.go, seed001.go, seed004.go);
// memcgd has another (packages memcg and policy). The simulator compares
// the two, so a bug shared through an import would be invisible to it.
// These tests hold them against each other, and against values worked out
// by hand from the kernel's formulas, over edge cases and under fuzzing
// (go test ./sim/kernel -fuzz FuzzPosRatio, ...): a bug in either shows.

import (
	"math"
	"testing"

	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/policy"
	"github.com/memcgd/memcgd/sim/kernel"
)

const page = kernel.PageSize

// checkPosRatio compares the model's position ratio with policy's at one
// point, and with the cubic computed in floating point.
func checkPosRatio(t *testing.T, thresh, bg, dom, dirty int64) {
	t.Helper()
	sp, limit := kernel.Setpoint(thresh, bg, dom)
	psp, plimit := policy.DirtySetpoint(memcg.DirtyLimits{Background: uint64(bg) * page, Limit: uint64(thresh) * page}, uint64(dom)*page)
	if uint64(sp) != psp/page || uint64(limit) != plimit/page {
		t.Fatalf("thresh %d bg %d dom %d: setpoint, limit %d, %d pages; policy.DirtySetpoint %d, %d bytes (%d, %d pages)",
			thresh, bg, dom, sp, limit, psp, plimit, psp/page, plimit/page)
	}
	got := kernel.GlobalPosRatio(sp, dirty, limit)
	if want := policy.PosRatio(sp, dirty, limit); got != want {
		t.Fatalf("setpoint %d dirty %d limit %d: pos_ratio %d, policy.PosRatio %d", sp, dirty, limit, got, want)
	}
	if got < 0 || got > 2<<kernel.RatelimitCalcShift {
		t.Fatalf("setpoint %d dirty %d limit %d: pos_ratio %d outside [0, 2048]", sp, dirty, limit, got)
	}
	fr := (thresh + bg) / 2
	if dirty < fr || limit-sp < 1000 {
		return // the cubic overflows far below freerun; tiny spans are all truncation
	}
	f := 0.0
	if dirty < limit {
		x := float64(sp-dirty) / float64(limit-sp)
		f = math.Min(math.Max(1+x*x*x, 0), 2)
	}
	if math.Abs(float64(got)-f*1024) > 4 {
		t.Fatalf("setpoint %d dirty %d limit %d: pos_ratio %d, the cubic gives %.1f", sp, dirty, limit, got, f*1024)
	}
	if dirty+1 < limit {
		if next := kernel.GlobalPosRatio(sp, dirty+1, limit); next > got {
			t.Fatalf("setpoint %d limit %d: pos_ratio rises from %d to %d at dirty %d", sp, limit, got, next, dirty+1)
		}
	}
}

// mm/page-writeback.c pos_ratio_polynom() and wb_position_ratio()'s
// global part: 2.0 at freerun, 1.0 at the setpoint, 0 at the limit.
func TestPosRatioMatchesPolicy(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		thresh, bg, dom, dirt int64
		want                  int64 // -1: only compared with policy
	}{
		{"at freerun", 1000, 500, 1000, 750, 2048},
		{"far below freerun", 1000, 500, 1000, 0, 2048},
		{"at the setpoint", 1000, 500, 1000, 875, 1024},
		{"halfway to the limit", 1000, 500, 1000, 937, 899},
		{"a page below the limit", 1000, 500, 1000, 999, -1},
		{"at the limit", 1000, 500, 1000, 1000, 0},
		{"past the limit", 1000, 500, 1000, 5000, 0},
		{"trailing limit above thresh", 1000, 500, 1200, 975, 1024},
		{"trailing limit, at thresh", 1000, 500, 1200, 1000, -1},
		{"a 4G machine's domain", 209056, 104528, 209056, 182809, -1},
		{"a 4G machine at the limit", 209056, 104528, 209056, 209056, 0},
		{"an even span", 200000, 100000, 200000, 180000, -1},
		{"no threshold", 0, 0, 0, 0, 0},
		{"one page", 1, 0, 1, 0, 1024},
		{"background next to thresh", 1000, 999, 1000, 999, 1024},
		{"huge", 1 << 40, 1 << 39, 1 << 40, 7 << 37, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkPosRatio(t, tc.thresh, tc.bg, tc.dom, tc.dirt)
			sp, limit := kernel.Setpoint(tc.thresh, tc.bg, tc.dom)
			if got := kernel.GlobalPosRatio(sp, tc.dirt, limit); tc.want >= 0 && got != tc.want {
				t.Errorf("pos_ratio %d, want %d", got, tc.want)
			}
		})
	}
}

func FuzzPosRatio(f *testing.F) {
	f.Add(uint32(1000), uint32(500), uint32(1000), uint32(937))
	f.Add(uint32(209056), uint32(104528), uint32(230000), uint32(182809))
	f.Add(uint32(1), uint32(0), uint32(0), uint32(0))
	f.Fuzz(func(t *testing.T, thresh, bg, dom, dirty uint32) {
		b := int64(bg)
		if b >= int64(thresh) {
			b = int64(thresh) / 2 // domain_dirty_limits() never gives more
		}
		checkPosRatio(t, int64(thresh), b, int64(dom), int64(dirty))
	})
}

// knobs builds memcg.Knobs for the dirty settings.
func knobs(ratio, bgRatio, bytes, bgBytes uint64) memcg.Knobs {
	return memcg.Knobs{DirtyRatio: ratio, DirtyBackgroundRatio: bgRatio, DirtyBytes: bytes, DirtyBackgroundBytes: bgBytes}
}

// checkDirtyLimits compares the global domain's domain_dirty_limits() with
// memcg.Knobs.DirtyLimits over avail pages (the two agree on bytes where
// they are a domain's own, as in the global domain and in seed 004).
func checkDirtyLimits(t *testing.T, kn memcg.Knobs, avail int64) (bg, thresh int64) {
	t.Helper()
	bg, thresh = kernel.DomainDirtyLimits(kn, avail, 0)
	d := kn.DirtyLimits(uint64(avail) * page)
	if uint64(thresh) != d.Limit/page || uint64(bg) != d.Background/page {
		t.Fatalf("%+v over %d pages: bg %d thresh %d pages; memcg %d, %d bytes (%d, %d pages)",
			kn, avail, bg, thresh, d.Background, d.Limit, d.Background/page, d.Limit/page)
	}
	if bg > thresh || (thresh > 0 && bg == thresh) {
		t.Fatalf("%+v over %d pages: bg %d not below thresh %d", kn, avail, bg, thresh)
	}
	return bg, thresh
}

// mm/page-writeback.c domain_dirty_limits(): bytes win over ratios, a ratio
// is held per PAGE_SIZE (so 20% of 1000 pages is 199), a background
// threshold at or above the threshold becomes half of it; in a memcg
// domain bytes become ratios of the global avail.
func TestDomainDirtyLimits(t *testing.T) {
	for _, tc := range []struct {
		name          string
		kn            memcg.Knobs
		avail, global int64 // global 0: the global domain
		bg, thresh    int64
	}{
		{"ratios truncate per page size", knobs(20, 10, 0, 0), 1000, 0, 99, 199},
		{"4G of dirtyable memory", knobs(20, 10, 0, 0), 1 << 20, 0, 104704, 209664},
		{"bytes", knobs(0, 0, 16<<20, 8<<20), 1 << 20, 0, 2048, 4096},
		{"bytes round up to a page", knobs(0, 0, 4097, 1), 1 << 20, 0, 1, 2},
		{"background at or above the threshold", knobs(10, 20, 0, 0), 1000, 0, 49, 99},
		{"bytes beside a larger background ratio", knobs(0, 50, 16<<20, 0), 1 << 20, 0, 2048, 4096},
		{"all zero", knobs(0, 0, 0, 0), 1 << 20, 0, 0, 0},
		{"nothing dirtyable", knobs(20, 10, 0, 0), 0, 0, 0, 0},
		{"the whole of it", knobs(100, 50, 0, 0), 1 << 20, 0, 1 << 19, 1 << 20},
		{"memcg domain, ratios", knobs(20, 10, 0, 0), 1000, 1 << 20, 99, 199},
		{"memcg domain, bytes as a ratio of global avail", knobs(0, 0, 64<<20, 32<<20), 1 << 15, 1 << 20, 256, 512},
		{"memcg domain, the ratio rounds up", knobs(0, 0, 64<<20, 32<<20), 1 << 15, 1000000, 272, 544},
		{"memcg domain, bytes above global avail", knobs(0, 0, 8<<30, 0), 1 << 15, 1 << 20, 0, 1 << 15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var bg, thresh int64
			if tc.global == 0 {
				bg, thresh = checkDirtyLimits(t, tc.kn, tc.avail)
			} else {
				bg, thresh = kernel.DomainDirtyLimits(tc.kn, tc.avail, tc.global)
				if tc.kn.DirtyBytes == 0 && tc.kn.DirtyBackgroundBytes == 0 {
					checkDirtyLimits(t, tc.kn, tc.avail) // ratios mean the same in both domains
				}
			}
			if bg != tc.bg || thresh != tc.thresh {
				t.Errorf("bg %d thresh %d, want %d %d", bg, thresh, tc.bg, tc.thresh)
			}
		})
	}
}

func FuzzDomainDirtyLimits(f *testing.F) {
	f.Add(uint8(20), uint8(10), uint64(0), uint64(0), uint32(1000))
	f.Add(uint8(0), uint8(50), uint64(16<<20), uint64(0), uint32(1<<20))
	f.Add(uint8(10), uint8(20), uint64(0), uint64(4097), uint32(7))
	f.Fuzz(func(t *testing.T, ratio, bgRatio uint8, bytes, bgBytes uint64, avail uint32) {
		// Knob values as memcg.Knobs.Set accepts them, below 2^62 bytes:
		// memcg saturates within a page of 2^64, where the kernel's own
		// DIV_ROUND_UP wraps.
		kn := knobs(uint64(ratio)%101, uint64(bgRatio)%101, bytes>>2, bgBytes>>2)
		checkDirtyLimits(t, kn, int64(avail))
	})
}

// mm/page-writeback.c mdtc_calc_avail(): the memcg's file pages plus its
// headroom, capped by the machine's clean memory outside the memcg.
func TestMdtcCalcAvail(t *testing.T) {
	for _, tc := range []struct {
		name                                          string
		file, headroom, dirty, globalAvail, globalDty int64
		want                                          int64
	}{
		{"headroom below other clean", 100, 50, 30, 1000, 200, 150},
		{"other clean below headroom", 100, 5000, 30, 1000, 200, 830},
		{"all dirty elsewhere", 100, 50, 0, 1000, 1000, 100},
		{"dirty above file pages", 100, 50, 150, 1000, 200, 150},
		{"no headroom", 100, 0, 30, 1000, 200, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := kernel.MdtcCalcAvail(tc.file, tc.headroom, tc.dirty, tc.globalAvail, tc.globalDty)
			if got != tc.want {
				t.Errorf("avail %d, want %d", got, tc.want)
			}
			// memcg.Dirtyable is file + headroom: the same when the
			// machine has clean memory to spare.
			clean := tc.globalAvail - min(tc.globalAvail, tc.globalDty) - (tc.file - min(tc.file, tc.dirty))
			if clean >= tc.headroom {
				if d := memcg.Dirtyable(uint64(tc.file)*page, uint64(tc.headroom)*page); d/page != uint64(got) {
					t.Errorf("avail %d, memcg.Dirtyable %d pages", got, d/page)
				}
			}
		})
	}
}

// level is one cgroup of a seed 004 chain, in pages, limited.
type level struct {
	limit, usage, file int64
	kn                 memcg.Knobs
}

// checkSeed004 compares the model's seed 004 chain with
// memcg.EffectiveDirtyLimits over the same cgroups.
func checkSeed004(t *testing.T, chain []level) (bg, thresh int64) {
	t.Helper()
	var kc []kernel.Seed004Level
	var stats []memcg.Stat
	var kns []memcg.Knobs
	for _, l := range chain {
		kc = append(kc, kernel.Seed004Level{File: l.file, Free: l.limit - min(l.limit, l.usage), Knobs: l.kn})
		stats = append(stats, memcg.Stat{Usage: uint64(l.usage) * page, Limit: uint64(l.limit) * page, File: uint64(l.file) * page})
		kns = append(kns, l.kn)
	}
	bg, thresh = kernel.Seed004Limits(kc)
	d := memcg.EffectiveDirtyLimits(stats, kns)
	if uint64(thresh) != d.Limit/page || uint64(bg) != d.Background/page {
		t.Fatalf("%+v: bg %d thresh %d pages; memcg %d, %d bytes (%d, %d pages)", chain, bg, thresh,
			d.Background, d.Limit, d.Background/page, d.Limit/page)
	}
	return bg, thresh
}

// Seed 004: each cgroup's thresholds over its file pages plus "the minimum
// free pages of all its parents", and the least of them.
func TestSeed004Limits(t *testing.T) {
	const M = 1 << 20 / page // pages in a MiB
	for _, tc := range []struct {
		name       string
		chain      []level
		bg, thresh int64
	}{
		{"a full 100M cgroup", []level{{100 * M, 100 * M, 100 * M, knobs(20, 10, 0, 0)}}, 2556, 5118},
		{"an empty 100M cgroup", []level{{100 * M, 0, 0, knobs(20, 10, 0, 0)}}, 2556, 5118},
		{"bytes", []level{{100 * M, 100 * M, 100 * M, knobs(0, 0, 20<<20, 10<<20)}}, 10 * M, 20 * M},
		{"the parent's free space bounds the child's", []level{
			{1024 * M, 900 * M, 800 * M, knobs(20, 10, 0, 0)},
			{500 * M, 100 * M, 50 * M, knobs(20, 10, 0, 0)},
		}, 4447, 8906}, // the child's 20% and 10% of 50M + the parent's 124M free
		{"the parent's limit is the lower", []level{
			{1024 * M, 900 * M, 800 * M, knobs(0, 0, 16<<20, 4<<20)},
			{500 * M, 100 * M, 50 * M, knobs(20, 0, 0, 32<<20)},
		}, 4 * M, 16 * M},
		{"background above the least limit", []level{
			{1024 * M, 900 * M, 800 * M, knobs(0, 10, 16<<20, 0)},
			{500 * M, 100 * M, 50 * M, knobs(0, 0, 64<<20, 32<<20)},
		}, 8 * M, 16 * M},
		{"over the limit", []level{{100 * M, 120 * M, 10 * M, knobs(20, 10, 0, 0)}}, 255, 511},
		{"no chain (the root)", nil, -1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var bg, thresh int64
			if tc.chain == nil {
				bg, thresh = kernel.Seed004Limits(nil)
				if bg < 1<<40 || thresh < 1<<40 {
					t.Errorf("root: bg %d thresh %d, want no limit", bg, thresh)
				}
				return
			}
			bg, thresh = checkSeed004(t, tc.chain)
			if tc.thresh >= 0 && (bg != tc.bg || thresh != tc.thresh) {
				t.Errorf("bg %d thresh %d, want %d %d", bg, thresh, tc.bg, tc.thresh)
			}
		})
	}
}

func FuzzSeed004Limits(f *testing.F) {
	f.Add(uint32(25600), uint32(25600), uint32(25600), uint8(20), uint8(10), uint64(0), uint64(0),
		uint32(128000), uint32(25600), uint32(12800), uint8(0), uint8(0), uint64(64<<20), uint64(32<<20), true)
	f.Fuzz(func(t *testing.T, l1, u1, f1 uint32, r1, b1 uint8, by1, bb1 uint64,
		l2, u2, f2 uint32, r2, b2 uint8, by2, bb2 uint64, two bool) {
		chain := []level{{int64(l1), int64(u1), int64(f1), knobs(uint64(r1)%101, uint64(b1)%101, by1>>2, bb1>>2)}}
		if two {
			chain = append(chain, level{int64(l2), int64(u2), int64(f2), knobs(uint64(r2)%101, uint64(b2)%101, by2>>2, bb2>>2)})
		}
		checkSeed004(t, chain)
	})
}

// checkWmarks compares seed 001's watermarks with memcg.Knobs.Watermarks.
// Where the high mark is capped at half the limit, memcg scales low in
// floating point and the model in integers: they may part by a page.
func checkWmarks(t *testing.T, minFree, limit int64) (low, high int64) {
	t.Helper()
	low, high = kernel.ReclaimWmarks(minFree, limit)
	lim := memcg.NoLimit
	if limit < 1<<62 {
		lim = uint64(limit) * page
	}
	w := memcg.Knobs{MinFreeKbytes: minFree}.Watermarks(lim)
	wl, wh := int64(w.Low/page), int64(w.High/page)
	capped := lim != memcg.NoLimit && w.High == lim/2
	if high != wh || (low != wl && !(capped && (low-wl == 1 || wl-low == 1))) {
		t.Fatalf("min_free_kbytes %d, limit %d pages: low %d high %d; memcg %d, %d pages", minFree, limit, low, high, wl, wh)
	}
	if low > high || (high > 0 && high*page > limit*page/2) {
		t.Fatalf("min_free_kbytes %d, limit %d pages: low %d, high %d: want low <= high <= limit/2", minFree, limit, low, high)
	}
	return low, high
}

// Seed 001: "low_wmark 3663360 / high_wmark 4396032" for a 500M cgroup.
func TestReclaimWmarks(t *testing.T) {
	for _, tc := range []struct {
		name           string
		minFree, limit int64
		low, high      int64
	}{
		{"the seed's 500M cgroup", memcg.MinFreeAuto, 500 << 20 / page, 3663360 / page, 4396032 / page},
		{"1M of min_free_kbytes", 1024, 1 << 30 / page, 320, 384},
		{"off", 0, 1 << 30 / page, 0, 0},
		{"no limit", memcg.MinFreeAuto, 1 << 62, 0, 0},
		{"a tiny limit caps high at half", memcg.MinFreeAuto, 64, 26, 32},
		{"min_free_kbytes above the limit", 262144, 1000, 416, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			low, high := checkWmarks(t, tc.minFree, tc.limit)
			if low != tc.low || high != tc.high {
				t.Errorf("low %d high %d, want %d %d", low, high, tc.low, tc.high)
			}
		})
	}
}

func FuzzReclaimWmarks(f *testing.F) {
	f.Add(int64(-1), uint64(128000))
	f.Add(int64(262144), uint64(1000))
	f.Add(int64(0), uint64(1))
	f.Fuzz(func(t *testing.T, minFree int64, limit uint64) {
		if minFree != memcg.MinFreeAuto {
			minFree = min(max(minFree, 0), memcg.MaxMinFreeKbytes) // what memcg.Knobs.Set accepts
		}
		checkWmarks(t, minFree, int64(limit%(1<<40)+1))
	})
}

// mm/page_alloc.c init_per_zone_wmark_min(): int_sqrt(kbytes * 16) within
// [128, 262144]; 2862 for the seed's 500M.
func TestDefaultMinFreeKbytes(t *testing.T) {
	for _, tc := range []struct{ pages, want int64 }{
		{500 << 20 / page, 2862}, {16 << 18, 16384}, {64, 128}, {1 << 40, 262144}, {0, 128},
	} {
		got := kernel.DefaultMinFreeKbytes(tc.pages)
		if m := memcg.DefaultMinFreeKbytes(uint64(tc.pages) * page); got != tc.want || uint64(got) != m {
			t.Errorf("%d pages: %d, memcg %d, want %d", tc.pages, got, m, tc.want)
		}
	}
}

// The constants both sides name after the kernel's.
func TestConstantsMatchPolicy(t *testing.T) {
	for _, hz := range []int64{100, 250, 300, 1000} {
		if got := kernel.BandwidthInterval(hz); int64(got) != int64(policy.BandwidthInterval) {
			t.Errorf("HZ %d: BANDWIDTH_INTERVAL %v, policy %v", hz, got, policy.BandwidthInterval)
		}
		if got := kernel.MaxPause(hz); int64(got) != int64(policy.MaxPause) {
			t.Errorf("HZ %d: MAX_PAUSE %v, policy %v", hz, got, policy.MaxPause)
		}
	}
	if kernel.RatelimitCalcShift != policy.RatelimitCalcShift {
		t.Errorf("RATELIMIT_CALC_SHIFT %d, policy %d", kernel.RatelimitCalcShift, policy.RatelimitCalcShift)
	}
	if kernel.InitBW*page != policy.InitBW {
		t.Errorf("INIT_BW %d pages/s, policy %d bytes/s", kernel.InitBW, policy.InitBW)
	}
	if kernel.DirtyPollThresh*page != policy.DirtyPollThresh {
		t.Errorf("DIRTY_POLL_THRESH %d pages, policy %d bytes", kernel.DirtyPollThresh, policy.DirtyPollThresh)
	}
	if kernel.MinWbDirtyPages != policy.MinWbDirtyPages {
		t.Errorf("MIN_WB_DIRTY_PAGES %d, policy %d", kernel.MinWbDirtyPages, policy.MinWbDirtyPages)
	}
	if kernel.MinWritebackPages != policy.MinWritebackPages {
		t.Errorf("MIN_WRITEBACK_PAGES %d, policy %d", kernel.MinWritebackPages, policy.MinWritebackPages)
	}
	if got, want := kernel.DefaultKnobs(), memcg.DefaultKnobs(); got != want {
		t.Errorf("a new cgroup's knobs %+v, memcg.DefaultKnobs %+v", got, want)
	}
}
