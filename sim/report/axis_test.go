package report

import (
	"math"
	"slices"
	"testing"
)

// yRange: the data set the scale; a threshold is drawn only within
// refFactor (2) times the data's largest value, and widens the axis to
// itself; the top is 5% above the highest value drawn.
func TestYRange(t *testing.T) {
	for _, tc := range []struct {
		name             string
		dataMin, dataMax float64
		refs             []float64
		lo, hi           float64
		on               []bool
	}{
		{"seed 004: dirty_thresh 1530 and bg 764 MiB over 100 MiB of dirty pages are off scale",
			0, 100, []float64{1530, 764}, 0, 105, []bool{false, false}},
		{"seed 004's patch: thresholds of 20 and 10 MiB over 19.2 MiB are drawn, and 20 sets the top",
			0, 19.2, []float64{20, 10}, 0, 21, []bool{true, true}},
		{"a reference at exactly 2x the data is drawn", 0, 50, []float64{100}, 0, 105, []bool{true}},
		{"a reference just past 2x the data is off scale", 0, 50, []float64{100.1}, 0, 52.5, []bool{false}},
		{"no references", 0, 200, nil, 0, 210, []bool{}},
		{"all-zero data: [0, 1], and every reference is off scale", 0, 0, []float64{6330}, 0, 1, []bool{false}},
		{"negative data extend the axis below 0", -10, 10, nil, -10, 11, []bool{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lo, hi, on := yRange(tc.dataMin, tc.dataMax, tc.refs)
			if math.Abs(lo-tc.lo) > 1e-9 || math.Abs(hi-tc.hi) > 1e-9 || !slices.Equal(on, tc.on) {
				t.Errorf("yRange(%v, %v, %v) = %v, %v, %v; want %v, %v, %v",
					tc.dataMin, tc.dataMax, tc.refs, lo, hi, on, tc.lo, tc.hi, tc.on)
			}
		})
	}
}

// bandMax: a column about seed 001's watermarks is scaled to them: the
// data count up to 2x the band's top and at least the top itself.
func TestBandMax(t *testing.T) {
	for _, tc := range []struct {
		name               string
		dataMax, top, want float64
	}{
		{"the fill from an empty cgroup (500 MiB free) is cut at 2x high_wmark", 500, 4.19, 8.38},
		{"data inside the band keep their own maximum", 6, 4.19, 6},
		{"data below the band still show the band", 1, 4.19, 4.19},
	} {
		if got := bandMax(tc.dataMax, tc.top); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: bandMax(%v, %v) = %v, want %v", tc.name, tc.dataMax, tc.top, got, tc.want)
		}
	}
}

// plotStart: the focus plots skip an empty lead-in longer than 10% of the run.
func TestPlotStart(t *testing.T) {
	for _, tc := range []struct {
		name              string
		leadIn, end, want float64
	}{
		{"seed 004: /test1 is empty until its dd starts at 120 s of 139 s", 119.9, 139.2, 119.9},
		{"seed 000: 1 s of 36 s is kept", 1, 36.2, 0},
		{"exactly 10% is kept", 10, 100, 0},
		{"no lead-in", 0, 100, 0},
		{"an empty run", 0, 0, 0},
	} {
		if got := plotStart(tc.leadIn, tc.end); got != tc.want {
			t.Errorf("%s: plotStart(%v, %v) = %v, want %v", tc.name, tc.leadIn, tc.end, got, tc.want)
		}
	}
}

// timeScale: milliseconds for runs under 2 s, seconds otherwise.
func TestTimeScale(t *testing.T) {
	for _, tc := range []struct {
		span float64
		per  float64
		unit string
	}{{0.5, 1000, "ms"}, {1.999, 1000, "ms"}, {2, 1, "s"}, {1186, 1, "s"}} {
		if per, unit := timeScale(tc.span); per != tc.per || unit != tc.unit {
			t.Errorf("timeScale(%v) = %v, %q; want %v, %q", tc.span, per, unit, tc.per, tc.unit)
		}
	}
}

// ticks: about n majors at 1, 2 or 5 times a power of ten, labelled with
// no more decimals than the step needs, the same on every label of an axis.
func TestTicks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lo, hi float64
		n      int
		want   []string
	}{
		{"0 to 105 MiB", 0, 105, 4, []string{"0", "20", "40", "60", "80", "100"}},
		{"seed 004's 119.9 to 139.2 s", 119.9, 139.2, 8, []string{"120", "122", "124", "126", "128", "130", "132", "134", "136", "138"}},
		{"seed 001's watermark band", 0, 8.8, 4, []string{"0", "2", "4", "6", "8"}},
		{"an all-zero panel's [0, 1]", 0, 1, 4, []string{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}},
		{"thousands", 0, 1250, 4, []string{"0", "500", "1000"}},
		{"hundredths", 0, 0.1, 4, []string{"0.00", "0.02", "0.04", "0.06", "0.08", "0.10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, tk := range ticks(tc.lo, tc.hi, tc.n, true) {
				if tk.Value < tc.lo-1e-9 || tk.Value > tc.hi+1e-9 {
					t.Errorf("tick %v outside [%v, %v]", tk.Value, tc.lo, tc.hi)
				}
				if tk.Label != "" {
					got = append(got, tk.Label)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("labels %q, want %q", got, tc.want)
			}
			for _, tk := range ticks(tc.lo, tc.hi, tc.n, false) {
				if tk.Label != "" {
					t.Errorf("unlabelled ticks carry label %q", tk.Label)
				}
			}
		})
	}
}

func TestFormatTick(t *testing.T) {
	for _, tc := range []struct {
		v, step float64
		want    string
	}{
		{25, 5, "25"},
		{75, 25, "75"},
		{1500, 500, "1500"},
		{0.4, 0.2, "0.4"},
		{1, 0.2, "1.0"},
		{0.30000000000000004, 0.1, "0.3"},
		{1e-17, 0.1, "0.0"},
		{math.Copysign(0, -1), 1, "0"},
		{-20, 10, "-20"},
		{0.05, 0.05, "0.05"},
	} {
		if got := formatTick(tc.v, tc.step); got != tc.want {
			t.Errorf("formatTick(%v, %v) = %q, want %q", tc.v, tc.step, got, tc.want)
		}
	}
}

// formatValue: a reference's value in its label, about three significant
// digits, no trailing zeros.
func TestFormatValue(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{1530.086, "1530"}, {356.363, "356"}, {19.99, "20"}, {9.98, "10"}, {9.9, "9.9"},
		{4.191, "4.2"}, {3.492, "3.5"}, {4.0, "4"}, {0.996, "1"}, {0.25, "0.25"}, {0, "0"}, {-0.001, "0"},
	} {
		if got := formatValue(tc.v); got != tc.want {
			t.Errorf("formatValue(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
