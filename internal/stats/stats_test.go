package stats

import (
	"math"
	"math/big"
	"slices"
	"testing"
	"time"
)

// The nearest rank, ⌈p/100 × n⌉: the expected values count ranks by hand.
func TestPercentileIsTheNearestRank(t *testing.T) {
	hundred := make([]int, 100) // 1..100
	for i := range hundred {
		hundred[i] = i + 1
	}
	thousand := make([]int, 1000) // 1..1000
	for i := range thousand {
		thousand[i] = i + 1
	}
	tests := []struct {
		name   string
		sorted []int
		p      float64
		want   int
	}{
		{"no samples give zero", nil, 50, 0},
		{"one sample is every percentile", []int{7}, 1, 7},
		{"one sample is p0 too", []int{7}, 0, 7},
		{"p0 is the minimum", hundred, 0, 1},
		{"a negative p is the minimum", hundred, -5, 1},
		{"NaN is the minimum", hundred, math.NaN(), 1},
		{"p1 of 1..100 is 1", hundred, 1, 1},
		{"p1.5 of 1..100 is the 2nd", hundred, 1.5, 2},
		{"p50 of 1..100 is the 50th, not a mean", hundred, 50, 50},
		{"p99 of 1..100 is the 99th", hundred, 99, 99},
		{"p99.01 of 1..100 is the 100th", hundred, 99.01, 100},
		{"p100 is the maximum", hundred, 100, 100},
		{"past 100 is the maximum", hundred, 250, 100},
		{"p99 of ten samples is the largest", hundred[:10], 99, 10},
		{"p90 of ten samples is the 9th", hundred[:10], 90, 9},
		{"p50 of four samples is the 2nd", []int{1, 2, 3, 4}, 50, 2},
		{"p50 of three samples is the middle", []int{1, 2, 3}, 50, 2},
		// 0.999 × 1000 is 999.0000000000001 in floating point.
		{"p99.9 of 1..1000 is the 999th, not the maximum", thousand, 99.9, 999},
		{"p0.1 of 1..1000 is the 1st", thousand, 0.1, 1},
		{"ties: p50 of 1,5,5,5 is 5", []int{1, 5, 5, 5}, 50, 5},
	}
	for _, tt := range tests {
		if got := Percentile(tt.sorted, tt.p); got != tt.want {
			t.Errorf("%s: Percentile(p %v of %d) = %d, want %d", tt.name, tt.p, len(tt.sorted), got, tt.want)
		}
	}
}

// Percentile works on any ordered type; a Duration stays a Duration.
func TestPercentileOfDurations(t *testing.T) {
	d := []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, time.Second}
	if got := Percentile(d, 75); got != 3*time.Millisecond {
		t.Errorf("p75 of %v = %v, want 3ms", d, got)
	}
	if got := Percentile(d, 76); got != time.Second {
		t.Errorf("p76 of %v = %v, want 1s", d, got)
	}
}

func TestMedianIsTheMiddleOrTheMeanOfTheMiddlePair(t *testing.T) {
	floats := []struct {
		sorted []float64
		want   float64
	}{
		{nil, 0},
		{[]float64{7}, 7},
		{[]float64{1, 2, 3}, 2},
		{[]float64{1, 2, 3, 4}, 2.5},
		{[]float64{-3, 0}, -1.5},
		{[]float64{1e308, 1.7e308}, 1.35e308}, // the sum overflows
	}
	for _, tt := range floats {
		if got := Median(tt.sorted); got != tt.want {
			t.Errorf("Median(%v) = %v, want %v", tt.sorted, got, tt.want)
		}
	}
	ints := []struct {
		sorted []int64
		want   int64
	}{
		{[]int64{1, 2, 3, 4}, 2}, // 2.5 rounds down
		{[]int64{1, 3}, 2},
		{[]int64{-3, 0}, -2},  // −1.5 rounds down, not towards zero
		{[]int64{-3, -1}, -2}, // exact
		{[]int64{math.MinInt64, math.MaxInt64}, -1},
		{[]int64{math.MaxInt64 - 1, math.MaxInt64}, math.MaxInt64 - 1},
	}
	for _, tt := range ints {
		if got := Median(tt.sorted); got != tt.want {
			t.Errorf("Median(%v) = %d, want %d", tt.sorted, got, tt.want)
		}
	}
	if got := Median([]uint64{math.MaxUint64 - 2, math.MaxUint64}); got != math.MaxUint64-1 {
		t.Errorf("Median of two uint64 near the top = %d, want %d: the sum overflowed", got, uint64(math.MaxUint64-1))
	}
	if got := Median([]uint8{200, 255}); got != 227 {
		t.Errorf("Median(uint8 200, 255) = %d, want 227", got)
	}
	if got := Median([]time.Duration{time.Millisecond, 3 * time.Millisecond}); got != 2*time.Millisecond {
		t.Errorf("Median of 1ms and 3ms = %v, want 2ms", got)
	}
}

// FuzzPercentile checks Percentile against the definition, counted in
// whole numbers: with p in thousandths of a percent, the sample at index
// i is the answer when it is the first whose rank i+1 reaches p × n.
func FuzzPercentile(f *testing.F) {
	f.Add([]byte{3, 1, 2}, uint32(50000))
	f.Add([]byte{1, 1, 1, 9}, uint32(99000))
	f.Add([]byte{}, uint32(0))
	f.Add([]byte{5}, uint32(100000))
	f.Fuzz(func(t *testing.T, raw []byte, milli uint32) {
		milli %= 100001 // 0 to 100 percent
		s := slices.Clone(raw)
		slices.Sort(s)
		p := float64(milli) / 1000
		got := Percentile(s, p)
		if len(s) == 0 {
			if got != 0 {
				t.Fatalf("Percentile(nil, %v) = %d, want 0", p, got)
			}
			return
		}
		want := s[len(s)-1]
		for i := range s {
			// (i+1)/n ≥ p/100 ⇔ 100000 × (i+1) ≥ milli × n.
			if uint64(100000)*uint64(i+1) >= uint64(milli)*uint64(len(s)) {
				want = s[i]
				break
			}
		}
		if got != want {
			t.Fatalf("Percentile(%v, %v) = %d, want %d", s, p, got, want)
		}
		if got2 := Percentile(s, p+0.001); got2 < got {
			t.Fatalf("Percentile(%v, %v) = %d below Percentile(p %v) = %d: not monotonic", s, p+0.001, got2, p, got)
		}
	})
}

// FuzzMedian checks Median against exact arithmetic (math/big): the
// mean of the middle pair, rounded down for integers.
func FuzzMedian(f *testing.F) {
	f.Add(int64(1), int64(2), int64(3), int64(4), uint8(4))
	f.Add(int64(math.MinInt64), int64(math.MaxInt64), int64(0), int64(0), uint8(2))
	f.Add(int64(-3), int64(0), int64(0), int64(0), uint8(2))
	f.Fuzz(func(t *testing.T, a, b, c, d int64, n uint8) {
		s := []int64{a, b, c, d}[:1+int(n)%4]
		slices.Sort(s)
		var want int64
		if len(s)%2 == 1 {
			want = s[len(s)/2]
		} else {
			sum := new(big.Int).Add(big.NewInt(s[len(s)/2-1]), big.NewInt(s[len(s)/2]))
			q, m := new(big.Int), new(big.Int)
			q.DivMod(sum, big.NewInt(2), m) // Euclidean: rounds down for a positive divisor
			want = q.Int64()
		}
		if got := Median(s); got != want {
			t.Fatalf("Median(%v) = %d, want %d", s, got, want)
		}
	})
}
