package report

import (
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// lineStyle is how a quantity is drawn. The quantities of one variant
// share its colour and differ by style.
type lineStyle int

const (
	solid  lineStyle = iota // a measured quantity
	dashed                  // a threshold or limit
	dotted                  // a second threshold in the same panel
)

// dashes is the style's dash pattern for gonum's LineStyle.
func (s lineStyle) dashes() []vg.Length {
	switch s {
	case dashed:
		return []vg.Length{vg.Points(5), vg.Points(2.5)}
	case dotted:
		return []vg.Length{vg.Points(1.2), vg.Points(1.8)}
	}
	return nil
}

// series is one line of a panel; x is in the figure's time unit.
type series struct {
	name  string
	style lineStyle
	xy    plotter.XYs
}

// extent is the smallest and largest y of xy; ok is false when xy is empty.
func extent(xy plotter.XYs) (lo, hi float64, ok bool) {
	for i, p := range xy {
		if i == 0 {
			lo, hi = p.Y, p.Y
			continue
		}
		lo, hi = min(lo, p.Y), max(hi, p.Y)
	}
	return lo, hi, len(xy) > 0
}

// envelope thins xy, when it has more than 2 × buckets points, to the
// lowest and the highest point of each of buckets runs of consecutive
// points, in their order. A line through them has the same peaks and
// troughs as one through every point (a bucket is narrower than a pixel
// column at the sizes drawn), with a bounded number of points.
func envelope(xy plotter.XYs, buckets int) plotter.XYs {
	if buckets < 1 || len(xy) <= 2*buckets {
		return xy
	}
	size := (len(xy) + buckets - 1) / buckets
	out := make(plotter.XYs, 0, 2*buckets)
	for start := 0; start < len(xy); start += size {
		run := xy[start:min(start+size, len(xy))]
		lo, hi := 0, 0
		for i, p := range run {
			if p.Y < run[lo].Y {
				lo = i
			}
			if p.Y > run[hi].Y {
				hi = i
			}
		}
		switch {
		case lo == hi:
			out = append(out, run[lo])
		case lo < hi:
			out = append(out, run[lo], run[hi])
		default:
			out = append(out, run[hi], run[lo])
		}
	}
	return out
}
