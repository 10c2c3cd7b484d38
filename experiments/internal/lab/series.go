package lab

import (
	"slices"

	"github.com/memcgd/memcgd/internal/stats"
)

// Series is a sequence of samples.
type Series []uint64

// Summary is a series' maximum, 99th percentile (nearest rank) and mean.
type Summary struct {
	N        int
	Max, P99 uint64
	Mean     float64
}

// Summary summarises s.
func (s Series) Summary() Summary {
	if len(s) == 0 {
		return Summary{}
	}
	var sum float64
	for _, v := range s {
		sum += float64(v)
	}
	return Summary{N: len(s), Max: s.Percentile(100), P99: s.Percentile(99), Mean: sum / float64(len(s))}
}

// Percentile is the p-th percentile of s by the nearest-rank method
// (stats.Percentile): the smallest sample not below p percent of the
// samples. It is 0 for an empty series.
func (s Series) Percentile(p float64) uint64 {
	return stats.Percentile(slices.Sorted(slices.Values(s)), p)
}

// Below is the share of samples below v, in percent.
func (s Series) Below(v uint64) float64 {
	if len(s) == 0 {
		return 0
	}
	n := 0
	for _, x := range s {
		if x < v {
			n++
		}
	}
	return float64(n) / float64(len(s)) * 100
}
