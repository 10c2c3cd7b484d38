package report

import (
	"fmt"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/memcgd/memcgd/sim/kernel"
	"github.com/memcgd/memcgd/sim/run"
	"github.com/memcgd/memcgd/sim/scenario"
)

// Plots draws, into dir, as PNG and SVG: dirty+writeback of the focus
// cgroup against its dirty thresholds, its usage against its limit and
// watermarks, and the disk's write throughput, one line per variant.
func Plots(dir string, sc *scenario.Scenario, rs []*run.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	mibOf := func(p int64) float64 { return float64(p) * kernel.PageSize / (1 << 20) }
	type series struct {
		name string
		f    func(r *run.Result, i int) (float64, bool)
	}
	figs := []struct {
		file, title, y string
		lines          []series
	}{
		{"dirty", "Dirty+writeback of " + sc.Report.Focus + " against its thresholds", "MiB", []series{
			{"dirty+writeback", func(r *run.Result, i int) (float64, bool) {
				s := r.Samples[i]
				return mibOf(s.Dirty + s.Writeback), true
			}},
			{"dirty_thresh", func(r *run.Result, i int) (float64, bool) {
				s := r.Samples[i]
				return mibOf(s.Thresh), s.Thresh < 1<<40
			}},
			{"background", func(r *run.Result, i int) (float64, bool) {
				s := r.Samples[i]
				return mibOf(s.BgThresh), s.BgThresh < 1<<40
			}},
		}},
		{"usage", "Usage of " + sc.Report.Focus + " against its limit and watermarks", "MiB", []series{
			{"usage", func(r *run.Result, i int) (float64, bool) { return mibOf(r.Samples[i].Usage), true }},
			{"limit-low_wmark", func(r *run.Result, i int) (float64, bool) {
				s := r.Samples[i]
				return mibOf(s.Limit - s.WmarkLow), s.Limit > 0 && s.WmarkLow > 0
			}},
			{"limit-high_wmark", func(r *run.Result, i int) (float64, bool) {
				s := r.Samples[i]
				return mibOf(s.Limit - s.WmarkHigh), s.Limit > 0 && s.WmarkHigh > 0
			}},
		}},
		{"throughput", "Disk write throughput", "MB/s", []series{
			{"written", func(r *run.Result, i int) (float64, bool) {
				if i == 0 {
					return 0, false
				}
				s, p := r.Samples[i], r.Samples[i-1]
				return float64(s.DiskWritten-p.DiskWritten) * kernel.PageSize / 1e6 / (s.T - p.T).Seconds(), true
			}},
		}},
	}
	for _, fg := range figs {
		p := plot.New()
		p.Title.Text = fg.title
		p.X.Label.Text = "simulated time (s)"
		p.Y.Label.Text = fg.y
		p.Legend.Top = true
		n := 0
		for _, r := range rs {
			for _, ln := range fg.lines {
				var xy plotter.XYs
				for i, s := range r.Samples {
					if y, ok := ln.f(r, i); ok {
						xy = append(xy, plotter.XY{X: s.T.Seconds(), Y: y})
					}
				}
				if len(xy) == 0 {
					continue
				}
				l, err := plotter.NewLine(xy)
				if err != nil {
					return fmt.Errorf("plot %s: %w", fg.file, err)
				}
				l.Color = plotutil.Color(n)
				l.Dashes = plotutil.Dashes(n % 3)
				n++
				p.Add(l)
				p.Legend.Add(r.Variant+" "+ln.name, l)
			}
		}
		for _, ext := range []string{".png", ".svg"} {
			name := filepath.Join(dir, fg.file+ext)
			if err := p.Save(8*vg.Inch, 4.5*vg.Inch, name); err != nil {
				return fmt.Errorf("save %s: %w", name, err)
			}
		}
	}
	return nil
}
