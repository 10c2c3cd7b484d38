package report

import (
	"math"
	"slices"
	"testing"

	"gonum.org/v1/plot/plotter"
)

// legendRows: the legend goes below the panels, in one row when its
// entries fit the width, else wrapped into more rows, never over the data.
func TestLegendRows(t *testing.T) {
	for _, tc := range []struct {
		name       string
		widths     []float64
		avail, gap float64
		want       [][]int
	}{
		{"three entries that fit exactly make one row", []float64{50, 60, 70}, 200, 10, [][]int{{0, 1, 2}}},
		{"one point less wraps the last entry", []float64{50, 60, 70}, 199, 10, [][]int{{0, 1}, {2}}},
		{"an entry wider than the figure has its own row", []float64{250, 10, 20}, 200, 10, [][]int{{0}, {1, 2}}},
		{"no entries, no rows", nil, 200, 10, nil},
	} {
		got := legendRows(tc.widths, tc.avail, tc.gap)
		if !slices.EqualFunc(got, tc.want, func(a, b []int) bool { return slices.Equal(a, b) }) {
			t.Errorf("%s: legendRows(%v, %v, %v) = %v, want %v", tc.name, tc.widths, tc.avail, tc.gap, got, tc.want)
		}
	}
}

// spreadLabels: margin labels at their lines' heights, pushed apart
// symmetrically when closer than gap, kept within [lo, hi], in order.
func TestSpreadLabels(t *testing.T) {
	for _, tc := range []struct {
		name        string
		want        []float64
		gap, lo, hi float64
		at          []float64
	}{
		{"labels far apart stay at their lines", []float64{10, 50}, 5, 0, 100, []float64{10, 50}},
		{"two close labels part evenly about their mean", []float64{20, 22}, 10, 0, 100, []float64{16, 26}},
		{"the result is in the order of the input", []float64{22, 20}, 10, 0, 100, []float64{26, 16}},
		{"a crowd at the top is pushed down under hi", []float64{99, 100}, 10, 0, 100, []float64{90, 100}},
		{"a crowd at the bottom is pushed up over lo", []float64{0, 1}, 10, 0, 100, []float64{0, 10}},
		{"a label clear of a pair stays", []float64{10, 12, 30}, 10, 0, 100, []float64{6, 16, 30}},
		{"a label that a spread pair reaches joins it", []float64{10, 12, 24}, 10, 0, 100, []float64{5 + 1.0/3, 15 + 1.0/3, 25 + 1.0/3}},
		{"off-scale labels (wanted above hi) stack at the top", []float64{50, 200, 210}, 10, 0, 100, []float64{50, 90, 100}},
	} {
		got := spreadLabels(tc.want, tc.gap, tc.lo, tc.hi)
		ok := len(got) == len(tc.at)
		for i := range got {
			ok = ok && math.Abs(got[i]-tc.at[i]) < 1e-9
		}
		if !ok {
			t.Errorf("%s: spreadLabels(%v, %v, %v, %v) = %v, want %v", tc.name, tc.want, tc.gap, tc.lo, tc.hi, got, tc.at)
		}
	}
}

// envelope keeps each bucket's extremes in time order, so peaks survive.
func TestEnvelope(t *testing.T) {
	xy := func(ys ...float64) plotter.XYs {
		var out plotter.XYs
		for i, y := range ys {
			out = append(out, plotter.XY{X: float64(i), Y: y})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		in      plotter.XYs
		buckets int
		want    plotter.XYs
	}{
		{"a short series is kept whole", xy(1, 5, 2), 2, xy(1, 5, 2)},
		{"two buckets of five keep min and max each, in order", xy(3, 9, 1, 4, 4, 7, 7, 0, 8, 2), 2,
			plotter.XYs{{X: 1, Y: 9}, {X: 2, Y: 1}, {X: 7, Y: 0}, {X: 8, Y: 8}}},
		{"a flat bucket keeps one point", xy(4, 4, 4, 4, 4, 4, 4, 4, 4, 4), 2, plotter.XYs{{X: 0, Y: 4}, {X: 5, Y: 4}}},
	} {
		got := envelope(tc.in, tc.buckets)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: envelope = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// rateStride: throughput is averaged over windows of 1/300 of the plot,
// and at least one sample.
func TestRateStride(t *testing.T) {
	for _, tc := range []struct {
		name         string
		period, span float64
		want         int
	}{
		{"seed 004: 100 ms samples over 139 s", 0.1, 139.2, 5},
		{"seed 001: 1 s samples over 1199 s", 1, 1199, 4},
		{"daemon-reaction: 1 ms samples over 6.7 s", 0.001, 6.7, 23},
		{"samples coarser than a window", 0.1, 20, 1},
		{"a zero period", 0, 20, 1},
	} {
		if got := rateStride(tc.period, tc.span); got != tc.want {
			t.Errorf("%s: rateStride(%v, %v) = %d, want %d", tc.name, tc.period, tc.span, got, tc.want)
		}
	}
}
