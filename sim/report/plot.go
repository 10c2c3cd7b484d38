package report

import (
	"fmt"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot/plotter"

	"github.com/memcgd/memcgd/sim/kernel"
	"github.com/memcgd/memcgd/sim/run"
	"github.com/memcgd/memcgd/sim/scenario"
)

// unlimited is the threshold above which a dirty threshold counts as none
// (the model's "no limit" is far above any memory size).
const unlimited = 1 << 40

// rateWindows is how many windows a throughput line averages over across
// the run: about two pixels each at the width drawn, so that a run sampled
// every millisecond does not draw each request's completion as a spike.
const rateWindows = 300

// Plots draws, into dir, as PNG and SVG, the figures of docs/sim.md
// ("Plots"): dirty (the focus cgroup's dirty+writeback against its dirty
// thresholds), usage (its usage against its limit, and with seed 001's
// watermarks its free pages under the limit against them) and throughput
// (the first disk's write throughput), each a row of panels per variant.
// A figure whose data are zero throughout in every variant is left out.
// It returns the paths it wrote, in order.
func Plots(dir string, sc *scenario.Scenario, rs []*run.Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	var files []string
	for _, f := range figures(sc, rs) {
		if allZero(f) {
			continue
		}
		for _, ext := range []string{"png", "svg"} {
			name := filepath.Join(dir, f.name+"."+ext)
			if err := writeFigure(name, f, ext); err != nil {
				return files, err
			}
			files = append(files, name)
		}
	}
	return files, nil
}

func writeFigure(name string, f *figure, format string) error {
	wt, err := f.render(format)
	if err != nil {
		return err
	}
	out, err := os.Create(name)
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	if _, err := wt.WriteTo(out); err != nil {
		out.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("close %s: %w", name, err)
	}
	return nil
}

// allZero reports whether every data line of f is zero throughout.
func allZero(f *figure) bool {
	for _, row := range f.panels {
		for _, p := range row {
			for _, d := range p.data {
				if lo, hi, ok := extent(d.xy); ok && (lo != 0 || hi != 0) {
					return false
				}
			}
		}
	}
	return true
}

func mibOf(pages int64) float64 { return float64(pages) * kernel.PageSize / (1 << 20) }

// gauge is one quantity of a sample in the plots' units; ok is false where
// the quantity does not exist (no threshold, no limit).
type gauge func(s *run.Sample) (v float64, ok bool)

// timeAxis maps the runs' samples onto the figures' time axis.
type timeAxis struct {
	perSecond  float64
	unit       string
	start, end float64 // seconds
}

func (ta timeAxis) label(note string) string {
	l := "simulated time (" + ta.unit + ")"
	if note != "" {
		l += "; " + note
	}
	return l
}

// line is r's samples from ta.start on, through g.
func (ta timeAxis) line(r *run.Result, name string, st lineStyle, g gauge) series {
	s := series{name: name, style: st}
	for i := range r.Samples {
		smp := &r.Samples[i]
		t := smp.T.Seconds()
		if t < ta.start {
			continue
		}
		if v, ok := g(smp); ok {
			s.xy = append(s.xy, plotter.XY{X: t * ta.perSecond, Y: v})
		}
	}
	return s
}

// figures are the run's three figures.
func figures(sc *scenario.Scenario, rs []*run.Result) []*figure {
	names := make([]string, len(rs))
	var end float64
	for i, r := range rs {
		names[i] = r.Variant
		if n := len(r.Samples); n > 0 {
			end = max(end, r.Samples[n-1].T.Seconds())
		}
	}
	colors := variantColors(names)
	per, unit := timeScale(end)
	whole := timeAxis{perSecond: per, unit: unit, end: end}
	focus := whole
	focus.start = plotStart(leadIn(rs), end)
	note := ""
	if focus.start > 0 {
		note = fmt.Sprintf("%s empty before %s %s", sc.Report.Focus, formatValue(focus.start*per), unit)
	}
	base := func(name, title string, ta timeAxis, note string, cols ...column) *figure {
		return &figure{name: name, title: title, xLabel: ta.label(note), xMin: ta.start * per, xMax: ta.end * per,
			cols: cols, variants: names, colors: colors}
	}
	return []*figure{
		dirtyFigure(base("dirty", "Dirty+writeback of "+sc.Report.Focus+" against its dirty thresholds", focus, note,
			column{unit: "MiB"}), focus, rs),
		usageFigure(sc, rs, focus, note, base),
		throughputFigure(sc, rs, whole, base),
	}
}

// leadIn is the time of the last sample before the focus cgroup first held
// a page, the earliest over the variants; 0 when it held one from the start.
func leadIn(rs []*run.Result) float64 {
	lead := -1.0
	for _, r := range rs {
		for i, s := range r.Samples {
			if s.Usage > 0 {
				if t := r.Samples[max(i-1, 0)].T.Seconds(); lead < 0 || t < lead {
					lead = t
				}
				break
			}
		}
	}
	return max(lead, 0)
}

func dirtyFigure(f *figure, ta timeAxis, rs []*run.Result) *figure {
	for _, r := range rs {
		f.panels = append(f.panels, []panel{{
			data: []series{ta.line(r, "dirty+writeback", solid, func(s *run.Sample) (float64, bool) {
				return mibOf(s.Dirty + s.Writeback), true
			})},
			refs: []series{
				ta.line(r, "dirty_thresh", dashed, func(s *run.Sample) (float64, bool) {
					return mibOf(s.Thresh), s.Thresh < unlimited
				}),
				ta.line(r, "dirty_bg_thresh", dotted, func(s *run.Sample) (float64, bool) {
					return mibOf(s.BgThresh), s.BgThresh < unlimited
				}),
			},
		}})
	}
	return f
}

type figureBase func(name, title string, ta timeAxis, note string, cols ...column) *figure

// usageFigure has a column of usage against the limit and, when a variant
// has seed 001's watermarks, a column of free pages under the limit
// against them: on the usage scale the watermarks (a few MiB under the
// limit) could not be told from the limit.
func usageFigure(sc *scenario.Scenario, rs []*run.Result, ta timeAxis, note string, base figureBase) *figure {
	wmarks := false
	for _, r := range rs {
		for _, s := range r.Samples {
			if s.WmarkHigh > 0 && s.Limit > 0 {
				wmarks = true
				break
			}
		}
	}
	title := "Usage of " + sc.Report.Focus + " against its limit"
	cols := []column{{title: "usage", unit: "MiB"}}
	if wmarks {
		title += ", and its free pages under the limit against seed 001's watermarks"
		cols = append(cols, column{title: "free under the limit (limit − usage)", unit: "MiB", band: true})
	}
	f := base("usage", title, ta, note, cols...)
	limited := func(s *run.Sample) bool { return s.Limit > 0 }
	for _, r := range rs {
		row := []panel{{
			data: []series{ta.line(r, "usage", solid, func(s *run.Sample) (float64, bool) { return mibOf(s.Usage), true })},
			refs: []series{ta.line(r, "limit", dashed, func(s *run.Sample) (float64, bool) { return mibOf(s.Limit), limited(s) })},
		}}
		if wmarks {
			row = append(row, panel{
				data: []series{ta.line(r, "free under limit", solid, func(s *run.Sample) (float64, bool) {
					return mibOf(s.Free), limited(s)
				})},
				refs: []series{
					ta.line(r, "high_wmark", dashed, func(s *run.Sample) (float64, bool) {
						return mibOf(s.WmarkHigh), limited(s) && s.WmarkHigh > 0
					}),
					ta.line(r, "low_wmark", dotted, func(s *run.Sample) (float64, bool) {
						return mibOf(s.WmarkLow), limited(s) && s.WmarkLow > 0
					}),
				},
			})
		}
		f.panels = append(f.panels, row)
	}
	return f
}

// throughputFigure is the first disk's write throughput, over the whole
// run (the disk serves every cgroup), against its write bandwidth.
func throughputFigure(sc *scenario.Scenario, rs []*run.Result, ta timeAxis, base figureBase) *figure {
	disk, bw := "disk 0", 0.0
	if len(sc.Disks) > 0 {
		disk, bw = sc.Disks[0].Name, float64(sc.Disks[0].WriteBandwidth)/(1<<20)
	}
	f := base("throughput", "Write throughput of "+disk+" (every cgroup's writes)", ta, "", column{unit: "MiB/s"})
	for _, r := range rs {
		p := panel{data: []series{rate(r, ta)}}
		if bw > 0 && len(r.Samples) > 0 {
			p.refs = []series{{name: "write_bandwidth", style: dashed, xy: plotter.XYs{
				{X: r.Samples[0].T.Seconds() * ta.perSecond, Y: bw}, {X: r.Samples[len(r.Samples)-1].T.Seconds() * ta.perSecond, Y: bw}}}}
		}
		f.panels = append(f.panels, []panel{p})
	}
	return f
}

// rate is the disk's write rate in MiB/s over windows of rateStride
// samples; each point sits at its window's end.
func rate(r *run.Result, ta timeAxis) series {
	s := series{name: "written", style: solid}
	n := len(r.Samples)
	if n < 2 {
		return s
	}
	period := (r.Samples[1].T - r.Samples[0].T).Seconds()
	stride := rateStride(period, ta.end-ta.start)
	for i := stride; i < n; i += stride {
		a, b := r.Samples[i-stride], r.Samples[i]
		if dt := (b.T - a.T).Seconds(); dt > 0 {
			s.xy = append(s.xy, plotter.XY{X: b.T.Seconds() * ta.perSecond, Y: mibOf(b.DiskWritten-a.DiskWritten) / dt})
		}
	}
	return s
}

// rateStride is the samples per throughput window for samples period
// seconds apart over a plot of span seconds: enough for a window of
// span/rateWindows, and at least one.
func rateStride(period, span float64) int {
	if !(period > 0) {
		return 1
	}
	return max(1, int(math.Ceil(span/rateWindows/period-1e-9)))
}
