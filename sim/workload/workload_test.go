package workload

import (
	"testing"

	"github.com/memcgd/memcgd/sim/kernel"
)

// Percentile is the nearest rank: the smallest sample not below p percent
// of them.
func TestLatenciesPercentile(t *testing.T) {
	var thousand Latencies
	for i := 1000; i >= 1; i-- { // out of order
		thousand = append(thousand, kernel.Time(i))
	}
	for _, tc := range []struct {
		name string
		l    Latencies
		p    float64
		want kernel.Time
	}{
		{"none", nil, 99, 0},
		{"one", Latencies{7}, 50, 7},
		{"one, the maximum", Latencies{7}, 100, 7},
		{"median of 1000", thousand, 50, 500},
		{"p99 of 1000", thousand, 99, 990},
		{"p99.9 of 1000", thousand, 99.9, 999},
		{"max of 1000", thousand, 100, 1000},
		{"p0 is the minimum", thousand, 0, 1},
		{"p50 of two", Latencies{30, 10}, 50, 10},
	} {
		if got := tc.l.Percentile(tc.p); got != tc.want {
			t.Errorf("%s: p%v = %v, want %v", tc.name, tc.p, got, tc.want)
		}
	}
	if thousand[0] != 1000 {
		t.Error("Percentile sorted the samples in place")
	}
}
