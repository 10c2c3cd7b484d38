package lab

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/memcgd/memcgd/internal/stats"
)

// Median is the median of v, ignoring NaNs (stats.Median: the mean of
// the two middle values for an even count); NaN when nothing is left.
func Median(v []float64) float64 {
	s := slices.DeleteFunc(slices.Clone(v), math.IsNaN)
	if len(s) == 0 {
		return math.NaN()
	}
	slices.Sort(s)
	return stats.Median(s)
}

// Medians gathers the rows of a Compare over repetitions and prints, for
// each quantity, each arm's median and the median of the per-repetition
// changes from the baseline: a change is taken between arms run back to
// back, within one repetition, never between medians.
type Medians struct {
	arms  []string
	rows  []*medianRow
	index map[string]*medianRow
	runs  int
}

type medianRow struct {
	name, format string
	vals         [][]float64 // per arm, per repetition
}

// NewMedians returns an empty summary of the arms, baseline first.
func NewMedians(arms ...string) *Medians {
	return &Medians{arms: arms, index: map[string]*medianRow{}}
}

// Num adds one repetition's figures of quantity name, one per arm in the
// order of NewMedians.
func (m *Medians) Num(name, format string, v ...float64) {
	r := m.index[name]
	if r == nil {
		r = &medianRow{name: name, format: format, vals: make([][]float64, len(m.arms))}
		m.index[name] = r
		m.rows = append(m.rows, r)
	}
	for i := range m.arms {
		x := math.NaN()
		if i < len(v) {
			x = v[i]
		}
		r.vals[i] = append(r.vals[i], x)
	}
	m.runs = max(m.runs, len(r.vals[0]))
}

// Runs is the most repetitions any quantity has.
func (m *Medians) Runs() int { return m.runs }

// String renders the medians as a markdown table.
func (m *Medians) String() string {
	h := []string{"quantity (median of runs)", m.arms[0]}
	for _, a := range m.arms[1:] {
		h = append(h, a, "change (median of runs)")
	}
	t := Table{Header: h}
	for _, r := range m.rows {
		row := []string{r.name, FormatNum(r.format, Median(r.vals[0]))}
		for i := 1; i < len(m.arms); i++ {
			ch := make([]float64, len(r.vals[i]))
			for k := range ch {
				ch[k] = relChange(r.vals[0][k], r.vals[i][k])
			}
			c := Median(ch)
			cs := "n/a"
			if !math.IsNaN(c) {
				cs = fmt.Sprintf("%+.1f%%", c)
			}
			row = append(row, FormatNum(r.format, Median(r.vals[i])), cs)
		}
		t.Add(row...)
	}
	return t.String()
}

// FormatNum prints v with format, "n/a" for NaN.
func FormatNum(format string, v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf(format, v)
}

// Targets checks figures against targets: for each target and arm, one
// figure per repetition, judged by their median.
type Targets struct {
	rows  []*targetRow
	index map[[2]string]*targetRow
}

type targetRow struct {
	target, arm, format string
	met                 func(float64) bool
	vals                []float64
}

// Add records one repetition's figure v of arm for target, printed with
// format; met says whether a median meets the target, nil for a figure
// shown beside the targets that has none.
func (t *Targets) Add(target, arm, format string, met func(float64) bool, v float64) {
	if t.index == nil {
		t.index = map[[2]string]*targetRow{}
	}
	k := [2]string{target, arm}
	r := t.index[k]
	if r == nil {
		r = &targetRow{target: target, arm: arm, format: format, met: met}
		t.index[k] = r
		t.rows = append(t.rows, r)
	}
	r.vals = append(r.vals, v)
}

// Empty says whether no figure was added.
func (t *Targets) Empty() bool { return len(t.rows) == 0 }

// String renders the targets as a markdown table: each repetition's
// figure, their median and whether the median meets the target.
func (t *Targets) String() string {
	tab := Table{Header: []string{"target", "arm", "per run", "median", "met"}}
	for _, r := range t.rows {
		var runs []string
		for _, v := range r.vals {
			runs = append(runs, FormatNum(r.format, v))
		}
		med := Median(r.vals)
		met := "no"
		switch {
		case r.met == nil:
			met = "—"
		case math.IsNaN(med):
			met = "n/a"
		case r.met(med):
			met = "yes"
		}
		tab.Add(r.target, r.arm, strings.Join(runs, ", "), FormatNum(r.format, med), met)
	}
	return tab.String()
}
