package main

import (
	"fmt"
	"strings"

	"github.com/memcgd/memcgd/experiments/internal/lab"
)

// agg gathers each arm's figures over the experiment's -runs repetitions,
// for tables of the median of runs.
type agg struct {
	arms []string
	vals map[string]map[string][]float64
}

func newAgg() *agg { return &agg{vals: map[string]map[string][]float64{}} }

func (a *agg) add(arm, key string, v float64) {
	m := a.vals[arm]
	if m == nil {
		m = map[string][]float64{}
		a.vals[arm] = m
		a.arms = append(a.arms, arm)
	}
	m[key] = append(m[key], v)
}

// med is the median over runs of an arm's figure, printed with format.
func (a *agg) med(arm, key, format string) string {
	return lab.FormatNum(format, lab.Median(a.vals[arm][key]))
}

// each lists an arm's figure run by run.
func (a *agg) each(arm, key, format string) string {
	var s []string
	for _, v := range a.vals[arm][key] {
		s = append(s, fmt.Sprintf(format, v))
	}
	return strings.Join(s, ", ")
}
