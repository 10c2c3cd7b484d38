package lab

import (
	"fmt"
	"math"
)

// Compare is a table of measurements of several arms on the same
// workload, one row per quantity, with each arm's relative change from
// the first (the baseline, stock).
type Compare struct {
	Table
	arms int
}

// NewCompare returns an empty comparison whose columns are the quantity,
// the baseline arm, then each other arm followed by its change from the
// baseline.
func NewCompare(arms ...string) *Compare {
	h := []string{"quantity", arms[0]}
	for _, a := range arms[1:] {
		h = append(h, a, "change")
	}
	return &Compare{Table: Table{Header: h}, arms: len(arms)}
}

// Num adds a row of the arms' numbers, in the order of NewCompare,
// printed with format (as "%.1f"), and their relative changes.
func (c *Compare) Num(name, format string, v ...float64) {
	row := []string{name, FormatNum(format, v[0])}
	for _, x := range v[1:] {
		row = append(row, FormatNum(format, x), Change(v[0], x))
	}
	c.Add(row...)
}

// Text adds a row of the arms' texts, without changes.
func (c *Compare) Text(name string, v ...string) {
	row := []string{name, v[0]}
	for _, x := range v[1:] {
		row = append(row, x, "")
	}
	c.Add(row...)
}

// Change is the relative change from a to b in percent, "n/a" when a is
// zero (and b is not) or either is NaN (not measured).
func Change(a, b float64) string {
	switch {
	case math.IsNaN(a) || math.IsNaN(b):
		return "n/a"
	case a == b:
		return "0%"
	case a == 0:
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", relChange(a, b))
}

// relChange is the relative change from a to b in percent; NaN when a is
// zero and b is not, or either is NaN; 0 when both are equal.
func relChange(a, b float64) float64 {
	switch {
	case math.IsNaN(a) || math.IsNaN(b):
		return math.NaN()
	case a == b:
		return 0
	case a == 0:
		return math.NaN()
	}
	return (b - a) / math.Abs(a) * 100
}
