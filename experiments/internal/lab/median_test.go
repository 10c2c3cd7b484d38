package lab

import (
	"math"
	"strings"
	"testing"
)

func TestMedianIgnoresNaNAndAveragesTheMiddlePair(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		in   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{nan, 5, 1, nan, 3}, 3},
		{[]float64{7}, 7},
	}
	for _, tt := range tests {
		if got := Median(tt.in); got != tt.want {
			t.Errorf("Median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
	if got := Median([]float64{nan}); !math.IsNaN(got) {
		t.Errorf("Median([NaN]) = %v, want NaN", got)
	}
	if got := Median(nil); !math.IsNaN(got) {
		t.Errorf("Median(nil) = %v, want NaN", got)
	}
}

// The change printed is the median of each run's change, taken between
// arms of the same run, not the change between the medians.
func TestMediansTakesChangesWithinARun(t *testing.T) {
	m := NewMedians("stock", "memcgd")
	m.Num("throughput", "%.0f", 100, 90)  // −10%
	m.Num("throughput", "%.0f", 1000, 50) // −95%
	m.Num("throughput", "%.0f", 200, 190) // −5%
	got := m.String()
	// Medians of the arms: 200 and 90, whose change would be −55%.
	for _, want := range []string{"| throughput ", "| 200 ", "| 90 ", "| -10.0% "} {
		if !strings.Contains(got, want) {
			t.Errorf("Medians =\n%s\nwant it to contain %q", got, want)
		}
	}
	if strings.Contains(got, "-55.0%") {
		t.Errorf("Medians =\n%s\nhas the change between the medians, want the median of the changes", got)
	}
	if m.Runs() != 3 {
		t.Errorf("Runs() = %d, want 3", m.Runs())
	}
}

func TestTargetsJudgeTheMedian(t *testing.T) {
	var tg Targets
	atLeast := func(v float64) bool { return v >= 0.95 }
	for _, v := range []float64{0.99, 0.90, 0.96} {
		tg.Add("throughput ≥ 0.95 × stock", "memcgd", "%.2f", atLeast, v)
	}
	for _, v := range []float64{0.99, 0.90, 0.91} {
		tg.Add("throughput ≥ 0.95 × stock", "fallback", "%.2f", atLeast, v)
	}
	tg.Add("CPU ≤ 10%", "memcgd", "%.1f", func(v float64) bool { return v <= 10 }, math.NaN())
	tg.Add("throughput vs stock (no target)", "memcgd", "%.2f", nil, 0.5)
	got := tg.String()
	for _, want := range []string{
		"| throughput ≥ 0.95 × stock       | memcgd   | 0.99, 0.90, 0.96 | 0.96   | yes |",
		"| throughput ≥ 0.95 × stock       | fallback | 0.99, 0.90, 0.91 | 0.91   | no  |",
		"| CPU ≤ 10%                       | memcgd   | n/a              | n/a    | n/a |",
		"| throughput vs stock (no target) | memcgd   | 0.50             | 0.50   | —   |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Targets =\n%s\nwant the row\n%s", got, want)
		}
	}
}
