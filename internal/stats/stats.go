// Package stats holds the order statistics that memcgd's reports, tests
// and experiments share: the percentile by nearest rank and the median.
// It is pure and allocates nothing: the caller sorts, once, and asks for
// as many percentiles as it likes.
package stats

import (
	"cmp"
	"math"
)

// Number is a type whose samples can be averaged: the integer and
// floating-point kinds, and types such as time.Duration built on them.
type Number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr |
		~float32 | ~float64
}

// rankSlack keeps a product that should be whole (0.999 × 1000 is
// 999.0000000000001 in floating point) from rounding up past it. It is
// small beside the 1/n steps of any sample count below a million.
const rankSlack = 1e-9

// Percentile returns the p-th percentile (p in percent) of sorted, which
// must be in ascending order, by the nearest-rank method: the smallest
// sample such that at least p percent of the samples are at or below it,
// sorted[⌈p/100 × n⌉ − 1]. The result is always one of the samples, never
// an interpolation between two. p at or below 0 (or NaN) gives the
// minimum, p at or above 100 the maximum; no samples give the zero value.
func Percentile[T cmp.Ordered](sorted []T, p float64) T {
	n := len(sorted)
	switch {
	case n == 0:
		var zero T
		return zero
	case !(p > 0):
		return sorted[0]
	case p >= 100:
		return sorted[n-1]
	}
	rank := int(math.Ceil(p/100*float64(n) - rankSlack))
	return sorted[min(max(rank, 1), n)-1]
}

// Median returns the median of sorted, which must be in ascending order:
// the middle sample, or for an even count the mean of the two middle
// ones; no samples give the zero value. The mean cannot overflow; for an
// integer type it rounds down (towards the lower middle sample).
func Median[T Number](sorted []T) T {
	n := len(sorted)
	if n == 0 {
		var zero T
		return zero
	}
	if n%2 == 1 {
		return sorted[n/2]
	}
	lo, hi := sorted[n/2-1], sorted[n/2]
	if T(1)/2 != 0 { // a floating-point type
		// Halves first: lo + hi can overflow to ±Inf. Halving is exact
		// (but for subnormals), so this rounds once, as (lo + hi) / 2 does.
		return lo/2 + hi/2
	}
	// hi ≥ lo, so their difference fits in a uint64 even where hi − lo
	// overflows T; its half fits in T and lo plus it lies within [lo, hi].
	return lo + T((uint64(hi)-uint64(lo))/2)
}
