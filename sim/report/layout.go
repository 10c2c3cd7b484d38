package report

import (
	"sort"
)

// Where the text around the panels goes. Nothing is ever drawn over the
// data: the legend sits below the panels, and the reference lines' labels
// sit in a margin to the right of each panel, at the height of their line.

// legendRows lays the legend's entries, of the given widths, left to right
// into rows no wider than avail, gap apart, and returns each row's entry
// indices. The legend goes below the panels, in one row when it fits (the
// usual case: a figure's quantities are two or three) and in more rather
// than over the data; an entry wider than avail has a row to itself.
func legendRows(widths []float64, avail, gap float64) [][]int {
	var rows [][]int
	var w float64
	for i, e := range widths {
		n := len(rows)
		if n == 0 || w+gap+e > avail {
			rows = append(rows, []int{i})
			w = e
			continue
		}
		rows[n-1] = append(rows[n-1], i)
		w += gap + e
	}
	return rows
}

// spreadLabels places labels wanted at the heights want (their lines'
// heights, or the top edge for an off-scale line) so that no two are less
// than gap apart, in the order of their wanted heights, each cluster of
// crowded labels centred on its wanted heights and kept within [lo, hi]
// when it fits. It returns the heights in the order of want.
func spreadLabels(want []float64, gap, lo, hi float64) []float64 {
	idx := make([]int, len(want))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return want[idx[a]] < want[idx[b]] })
	// A cluster holds sorted labels first..first+n-1 at bottom, bottom+gap, ...
	type cluster struct {
		first, n int
		sum      float64 // of the wanted heights
		bottom   float64
	}
	place := func(c *cluster) {
		c.bottom = c.sum/float64(c.n) - float64(c.n-1)*gap/2
		if top := c.bottom + float64(c.n-1)*gap; top > hi {
			c.bottom -= top - hi
		}
		c.bottom = max(c.bottom, lo)
	}
	var cs []cluster
	for k, i := range idx {
		c := cluster{first: k, n: 1, sum: want[i]}
		place(&c)
		for len(cs) > 0 {
			p := &cs[len(cs)-1]
			if p.bottom+float64(p.n-1)*gap+gap <= c.bottom {
				break
			}
			c = cluster{first: p.first, n: p.n + c.n, sum: p.sum + c.sum}
			place(&c)
			cs = cs[:len(cs)-1]
		}
		cs = append(cs, c)
	}
	out := make([]float64, len(want))
	for _, c := range cs {
		for j := range c.n {
			out[idx[c.first+j]] = c.bottom + float64(j)*gap
		}
	}
	return out
}
