package report

import (
	"fmt"
	"image/color"
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

// plotRun is what the figures of a run share: its variants, their
// colours, and the time axes.
type plotRun struct {
	sc       *scenario.Scenario
	rs       []*run.Result
	variants []string
	colors   []color.Color
	// whole spans the run; focus skips the focus cgroup's empty lead-in
	// (plotStart), which focusNote then names.
	whole, focus timeAxis
	focusNote    string
}

// figures are the run's three figures.
func figures(sc *scenario.Scenario, rs []*run.Result) []*figure {
	pr := &plotRun{sc: sc, rs: rs, variants: make([]string, len(rs))}
	var end float64
	for i, r := range rs {
		pr.variants[i] = r.Variant
		if n := len(r.Samples); n > 0 {
			end = max(end, r.Samples[n-1].T.Seconds())
		}
	}
	pr.colors = variantColors(pr.variants)
	per, unit := timeScale(end)
	pr.whole = timeAxis{perSecond: per, unit: unit, end: end}
	pr.focus = pr.whole
	pr.focus.start = plotStart(leadIn(rs), end)
	if pr.focus.start > 0 {
		pr.focusNote = fmt.Sprintf("%s empty before %s %s", sc.Report.Focus, formatValue(pr.focus.start*per), unit)
	}
	return []*figure{pr.dirty(), pr.usage(), pr.throughput()}
}

// figure is an empty figure of the run on time axis ta.
func (pr *plotRun) figure(name, title string, ta timeAxis, note string, cols ...column) *figure {
	return &figure{name: name, title: title, xLabel: ta.label(note), xMin: ta.start * ta.perSecond,
		xMax: ta.end * ta.perSecond, cols: cols, variants: pr.variants, colors: pr.colors}
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

// dirty is the focus cgroup's dirty+writeback against its dirty thresholds.
func (pr *plotRun) dirty() *figure {
	ta := pr.focus
	f := pr.figure("dirty", "Dirty+writeback of "+pr.sc.Report.Focus+" against its dirty thresholds", ta, pr.focusNote,
		column{unit: "MiB"})
	for _, r := range pr.rs {
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

// usage has a column of usage against the limit and, when a variant has
// seed 001's watermarks, a column of free pages under the limit against
// them: on the usage scale the watermarks (a few MiB under the limit)
// could not be told from the limit.
func (pr *plotRun) usage() *figure {
	ta := pr.focus
	wmarks := false
	for _, r := range pr.rs {
		for _, s := range r.Samples {
			if s.WmarkHigh > 0 && s.Limit > 0 {
				wmarks = true
				break
			}
		}
	}
	title := "Usage of " + pr.sc.Report.Focus + " against its limit"
	cols := []column{{title: "usage", unit: "MiB"}}
	if wmarks {
		title += ", and its free pages under the limit against seed 001's watermarks"
		cols = append(cols, column{title: "free under the limit (limit − usage)", unit: "MiB", band: true})
	}
	f := pr.figure("usage", title, ta, pr.focusNote, cols...)
	limited := func(s *run.Sample) bool { return s.Limit > 0 }
	for _, r := range pr.rs {
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

// throughput is the first disk's write throughput, over the whole run
// (the disk serves every cgroup), against its write bandwidth.
func (pr *plotRun) throughput() *figure {
	ta := pr.whole
	disk, bw := "disk 0", 0.0
	if len(pr.sc.Disks) > 0 {
		disk, bw = pr.sc.Disks[0].Name, float64(pr.sc.Disks[0].WriteBandwidth)/(1<<20)
	}
	f := pr.figure("throughput", "Write throughput of "+disk+" (every cgroup's writes)", ta, "", column{unit: "MiB/s"})
	for _, r := range pr.rs {
		p := panel{data: []series{rate(r, ta)}}
		if bw > 0 && len(r.Samples) > 0 {
			first, last := r.Samples[0].T.Seconds(), r.Samples[len(r.Samples)-1].T.Seconds()
			p.refs = []series{{name: "write_bandwidth", style: dashed,
				xy: plotter.XYs{{X: first * ta.perSecond, Y: bw}, {X: last * ta.perSecond, Y: bw}}}}
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
