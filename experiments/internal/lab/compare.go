package lab

import (
	"fmt"
	"math"
)

// Compare is a table of measurements without and with memcgd, one row per
// quantity, with the relative change.
type Compare struct {
	Table
}

// NewCompare returns an empty comparison whose columns are the quantity,
// the two arms and the change.
func NewCompare(without, with string) *Compare {
	return &Compare{Table{Header: []string{"quantity", without, with, "change"}}}
}

// Num adds a row of two numbers printed with format (as "%.1f"), and
// their relative change.
func (c *Compare) Num(name, format string, without, with float64) {
	c.Add(name, fmt.Sprintf(format, without), fmt.Sprintf(format, with), Change(without, with))
}

// Text adds a row of two texts, without a change.
func (c *Compare) Text(name, without, with string) {
	c.Add(name, without, with, "")
}

// Change is the relative change from a to b in percent, "n/a" when a is
// zero (and b is not).
func Change(a, b float64) string {
	switch {
	case a == b:
		return "0%"
	case a == 0:
		return "n/a"
	}
	p := (b - a) / math.Abs(a) * 100
	return fmt.Sprintf("%+.1f%%", p)
}
