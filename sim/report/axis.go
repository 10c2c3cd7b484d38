package report

import (
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
)

// The axis rules of the plots. They are pure functions of the data so that
// each can be stated in one sentence and tested apart from the drawing.

const (
	// refFactor: a reference line (a threshold, a limit) is drawn only
	// when it is at most refFactor times the data's largest value, so that
	// the data always fill at least 1/refFactor of the panel's height. A
	// reference beyond is labelled "off scale" at the panel's edge instead.
	refFactor = 2.0
	// bandFactor: a column about a band the data should stay in (seed
	// 001's watermarks, in free pages under the limit) is scaled to the
	// band: its data count up to bandFactor times the band's top, and what
	// lies above leaves the panel through its top edge.
	bandFactor = 2.0
	// headroom is the share of the range left above the highest value
	// drawn, so that a line at the top does not merge with the frame.
	headroom = 0.05
	// leadInShare: a focus cgroup's plots start at its first page, rather
	// than at 0, when the empty lead-in is more than this share of the run.
	leadInShare = 0.1
)

// yRange is the y-axis range of a column of panels whose data span
// [dataMin, dataMax] and whose reference lines reach the values refs. It
// runs from 0 (or dataMin, when negative) to the largest of dataMax and the
// references within refFactor × dataMax, plus headroom; on[i] reports
// whether refs[i] is within range and so drawn. With nothing above 0 the
// range is [0, 1], so that an all-zero panel still has an axis.
func yRange(dataMin, dataMax float64, refs []float64) (lo, hi float64, on []bool) {
	top := max(dataMax, 0)
	on = make([]bool, len(refs))
	for i, r := range refs {
		if r <= refFactor*max(dataMax, 0) {
			on[i] = true
			top = max(top, r)
		}
	}
	lo = min(dataMin, 0)
	if top <= 0 && lo == 0 {
		return 0, 1, on
	}
	return lo, top + headroom*(top-lo), on
}

// bandMax is the data maximum a band column is scaled to: the data's own
// maximum, but at least the band's top (so that the band is always drawn)
// and at most bandFactor times it.
func bandMax(dataMax, bandTop float64) float64 {
	return min(max(dataMax, bandTop), bandFactor*bandTop)
}

// plotStart is where the plots of a focus cgroup start: at leadIn, the
// last sample before the cgroup first held a page in any variant, when that
// empty lead-in is more than leadInShare of the run ending at end; else
// at 0.
func plotStart(leadIn, end float64) float64 {
	if end > 0 && leadIn > leadInShare*end {
		return leadIn
	}
	return 0
}

// timeScale picks the unit of the time axis for a run of span seconds:
// milliseconds under 2 s, seconds otherwise. perSecond converts seconds to
// the unit.
func timeScale(span float64) (perSecond float64, unit string) {
	if span < 2 {
		return 1000, "ms"
	}
	return 1, "s"
}

// niceStep is the step between about n major ticks over [lo, hi]: 1, 2 or
// 5 times a power of ten, the one giving the count closest to n.
func niceStep(lo, hi float64, n int) float64 {
	span := hi - lo
	if !(span > 0) || n < 1 {
		return 1
	}
	raw := span / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	best, bestErr := p, math.Inf(1)
	for _, m := range []float64{1, 2, 5, 10} {
		step := m * p
		if e := math.Abs(span/step - float64(n)); e < bestErr {
			best, bestErr = step, e
		}
	}
	return best
}

// stepDecimals is the number of decimals a tick label needs at step: none
// when the step is a whole number.
func stepDecimals(step float64) int {
	if step >= 1 || step <= 0 {
		return 0
	}
	// The small bias absorbs the error of steps such as 0.1 = 1e-1.
	return int(math.Ceil(-math.Log10(step) - 1e-9))
}

// formatTick writes a tick's value with the decimals its step needs, so
// that integer steps read "25", not "25.00".
func formatTick(v, step float64) string {
	if math.Abs(v) < step*1e-6 {
		v = 0 // a multiple of step that float error moved off zero, or -0
	}
	return strconv.FormatFloat(v, 'f', stepDecimals(step), 64)
}

// formatValue writes a reference line's value for its label with about
// three significant digits and no trailing zeros: 1530, 20, 3.5, 0.25.
func formatValue(v float64) string {
	a := math.Abs(v)
	d := 2
	switch {
	case a >= 9.95:
		d = 0
	case a >= 0.995:
		d = 1
	}
	s := strconv.FormatFloat(v, 'f', d, 64)
	if d > 0 {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		return "0"
	}
	return s
}

// ticks are the major ticks at multiples of niceStep over [lo, hi], about
// n of them, labelled by formatTick, with one minor tick between each two.
// With labels false the majors come without labels (gonum then draws them
// as minor marks), for the panels above the bottom row.
func ticks(lo, hi float64, n int, labels bool) []plot.Tick {
	step := niceStep(lo, hi, n)
	var ts []plot.Tick
	first := math.Ceil(lo/step-1e-9) * step
	for i := 0; ; i++ {
		v := first + float64(i)*step
		if v > hi+step*1e-9 {
			break
		}
		if m := v - step/2; m >= lo && labels {
			ts = append(ts, plot.Tick{Value: m})
		}
		t := plot.Tick{Value: v}
		if labels {
			t.Label = formatTick(v, step)
		}
		ts = append(ts, t)
	}
	if m := first - step/2; m >= lo && labels {
		ts = append(ts, plot.Tick{Value: m})
	}
	return ts
}
