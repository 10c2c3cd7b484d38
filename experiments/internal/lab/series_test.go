package lab

import "testing"

func TestSeriesPercentileIsNearestRank(t *testing.T) {
	hundred := make(Series, 100)
	for i := range hundred {
		hundred[i] = uint64(100 - i) // 100 down to 1: order must not matter
	}
	thousand := make(Series, 1000)
	for i := range thousand {
		thousand[i] = uint64(i + 1)
	}
	tests := []struct {
		name string
		s    Series
		p    float64
		want uint64
	}{
		{"empty series", nil, 99, 0},
		{"one sample is every percentile", Series{7}, 1, 7},
		{"p99 of 1..100 is 99", hundred, 99, 99},
		{"p50 of 1..100 is 50", hundred, 50, 50},
		{"p100 is the maximum", hundred, 100, 100},
		{"p0 is the minimum", hundred, 0, 1},
		{"p99 of ten samples is the largest", Series{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 99, 10},
		// 0.999 × 1000 is 999.0000000000001 in floating point.
		{"p99.9 of 1..1000 is 999, not the maximum", thousand, 99.9, 999},
	}
	for _, tt := range tests {
		if got := tt.s.Percentile(tt.p); got != tt.want {
			t.Errorf("%s: Percentile(%v) = %d, want %d", tt.name, tt.p, got, tt.want)
		}
	}
}

func TestSeriesSummaryAndBelow(t *testing.T) {
	s := Series{4, 1, 3, 2}
	got := s.Summary()
	want := Summary{N: 4, Max: 4, P99: 4, Mean: 2.5}
	if got != want {
		t.Errorf("Summary() = %+v, want %+v", got, want)
	}
	if b := s.Below(3); b != 50 {
		t.Errorf("Below(3) = %v%%, want 50%% (1 and 2 of four samples)", b)
	}
}
