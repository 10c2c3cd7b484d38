package lab

import "testing"

func TestChangeIsRelativeToTheFirstArm(t *testing.T) {
	tests := []struct {
		a, b float64
		want string
	}{
		{100, 1, "-99.0%"},
		{100, 102, "+2.0%"},
		{5, 5, "0%"},
		{0, 0, "0%"},
		{0, 3, "n/a"}, // no base to be relative to
	}
	for _, tt := range tests {
		if got := Change(tt.a, tt.b); got != tt.want {
			t.Errorf("Change(%v, %v) = %q, want %q", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestTableAlignsColumns(t *testing.T) {
	tab := Table{Header: []string{"a", "quantity"}}
	tab.Add("long cell", "1")
	want := "| a         | quantity |\n" +
		"|-----------|----------|\n" +
		"| long cell | 1        |\n"
	if got := tab.String(); got != want {
		t.Errorf("String() =\n%s\nwant\n%s", got, want)
	}
}

func TestCompareGivesEachArmItsChangeFromTheFirst(t *testing.T) {
	c := NewCompare("stock", "memcgd", "fallback")
	c.Num("MiB/s", "%.0f", 1000, 950, 900)
	c.Text("path", "—", "tracker", "poll")
	want := "| quantity | stock | memcgd  | change | fallback | change |\n" +
		"|----------|-------|---------|--------|----------|--------|\n" +
		"| MiB/s    | 1000  | 950     | -5.0%  | 900      | -10.0% |\n" +
		"| path     | —     | tracker |        | poll     |        |\n"
	if got := c.String(); got != want {
		t.Errorf("String() =\n%s\nwant\n%s", got, want)
	}
}
