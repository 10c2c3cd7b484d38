package memcg

import (
	"math"
	"math/bits"
)

// Watermarks are seed 001's reclaim_wmarks: amounts of free space under a
// cgroup's limit. Background reclaim wakes when free drops below Low and
// runs until free reaches High; Min is min_free_kbytes in bytes.
type Watermarks struct {
	Min, Low, High uint64
}

// Enabled reports whether background reclaim runs at all (min_free_kbytes
// 0, or no limit, disables it).
func (w Watermarks) Enabled() bool { return w.High > 0 }

// DefaultMinFreeKbytes sizes min_free_kbytes from a cgroup's limit the way
// the kernel sizes its own from lowmem (mm/page_alloc.c,
// init_per_zone_wmark_min: int_sqrt(lowmem_kbytes * 16), clamped to
// [128, 262144]). A 500 MiB limit gives 2862, the seed 001 figure.
func DefaultMinFreeKbytes(limit uint64) uint64 {
	if limit == NoLimit {
		return 0
	}
	kb := limit >> 10
	if kb > math.MaxUint64/16 {
		return MaxMinFreeKbytes
	}
	return min(max(isqrt(kb*16), 128), MaxMinFreeKbytes)
}

// Watermarks derives the cgroup's reclaim watermarks from min_free_kbytes
// and its limit, as __setup_per_zone_wmarks() (mm/page_alloc.c) derives a
// zone's: low = min + min/4, high = low + min/4. Seed 001's
// "low_wmark 3663360 / high_wmark 4396032" is min 2862 KiB.
// A cgroup without a limit has nothing to keep free: no watermarks.
func (k Knobs) Watermarks(limit uint64) Watermarks {
	if limit == NoLimit || k.MinFreeKbytes == 0 {
		return Watermarks{}
	}
	kb := uint64(k.MinFreeKbytes)
	if k.MinFreeKbytes == MinFreeAuto {
		kb = DefaultMinFreeKbytes(limit)
	}
	m := kb << 10
	tmp := m >> 2
	w := Watermarks{Min: m, Low: m + tmp, High: m + 2*tmp}
	// A watermark above the limit could never be met: cap the high mark
	// at half the limit so reclaim stops, keeping the ratios.
	if w.High > limit/2 {
		scale := float64(limit/2) / float64(w.High)
		w = Watermarks{Min: uint64(float64(w.Min) * scale), Low: uint64(float64(w.Low) * scale), High: limit / 2}
	}
	return w
}

// isqrt is int_sqrt() (lib/math/int_sqrt.c): the floor of the square
// root, by the same bit-by-bit method.
func isqrt(x uint64) uint64 {
	if x < 2 {
		return x
	}
	m := uint64(1) << ((63 - bits.LeadingZeros64(x)) &^ 1)
	var y uint64
	for m != 0 {
		b := y + m
		y >>= 1
		if x >= b {
			x -= b
			y += m
		}
		m >>= 2
	}
	return y
}
