package report

import (
	"fmt"
	"image/color"
	"io"

	stdfont "golang.org/x/image/font"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// A figure is one file: small multiples, a row of panels per variant and a
// column per quantity, on one time axis, with every panel of a column on
// one y-range. Each panel holds one variant's measured line (solid) and its
// reference lines (thresholds, limits, watermarks: dashed and dotted, drawn
// over the data so that the data never hide them), all in the variant's
// colour. The reference lines are labelled in a margin to the right of the
// panel; the legend sits below the panels.

// column is one quantity shown for every variant.
type column struct {
	// title is drawn above the column when a figure has more than one.
	title string
	// unit labels the y-axis and the reference lines' values.
	unit string
	// band columns are scaled to their reference lines (bandMax).
	band bool
}

// panel is one variant's view of one quantity.
type panel struct {
	data []series // solid, drawn first
	refs []series // drawn over the data
}

type figure struct {
	// name is the file name without its extension.
	name, title string
	// xLabel names the time axis and its unit; x runs over [xMin, xMax].
	xLabel     string
	xMin, xMax float64
	cols       []column
	variants   []string
	colors     []color.Color
	panels     [][]panel // [variant][column]
}

// The figure's geometry. The PNG is 96 dpi (gonum's vgimg default): 864
// pixels wide.
const (
	figWidth    = 9 * vg.Inch
	rowHeight   = 1.4 * vg.Inch
	titleHeight = 0.4 * vg.Inch
	// xAxisHeight is the bottom row's tick labels and axis label.
	xAxisHeight   = 0.45 * vg.Inch
	legendRowH    = 0.22 * vg.Inch
	colTitleH     = 0.2 * vg.Inch
	bottomPad     = 0.08 * vg.Inch
	labelGap      = vg.Length(4)
	legendGap     = vg.Length(18)
	legendSample  = vg.Length(24)
	dataLineWidth = vg.Length(1.1)
	refLineWidth  = vg.Length(1.2)
	// refHalo is the width of the white dashes under a reference line's
	// dashes: they show against a data line beneath, which shows in the
	// gaps.
	refHalo = vg.Length(2.8)
	// envelopeBuckets bounds the points drawn per line (envelope).
	envelopeBuckets = 1000
)

// The figure's fonts and inks; read only.
var (
	sans       = font.Font{Typeface: "Liberation", Variant: "Sans"}
	sansBold   = font.Font{Typeface: "Liberation", Variant: "Sans", Weight: stdfont.WeightBold}
	gridColor  = color.Gray{0xe4}
	axisColor  = color.Gray{0x40}
	legendInk  = color.Gray{0x30}
	whiteColor = color.White
)

// textStyle is a style of the figure's text.
func textStyle(f font.Font, size vg.Length, c color.Color) text.Style {
	return text.Style{Color: c, Font: font.From(f, size), Handler: plot.DefaultTextHandler}
}

// legendEntry is a quantity of the figure and how it is drawn.
type legendEntry struct {
	name  string
	style lineStyle
}

// legend lists the figure's quantities, in column order, once each.
func (f *figure) legend() []legendEntry {
	var es []legendEntry
	seen := map[legendEntry]bool{}
	for c := range f.cols {
		for _, row := range f.panels {
			for _, s := range append(append([]series(nil), row[c].data...), row[c].refs...) {
				e := legendEntry{s.name, s.style}
				if !seen[e] {
					seen[e] = true
					es = append(es, e)
				}
			}
		}
	}
	return es
}

// colTitles reports whether the columns get titles: only with more than one.
func (f *figure) colTitles() bool { return len(f.cols) > 1 }

// legendLayout lays out the legend's entries into rows below the panels.
func (f *figure) legendLayout() ([]legendEntry, [][]int) {
	es := f.legend()
	sty := textStyle(sans, 9, legendInk)
	ws := make([]float64, len(es))
	for i, e := range es {
		ws[i] = float64(legendSample + labelGap + sty.Width(e.name))
	}
	return es, legendRows(ws, float64(figWidth-2*legendGap), float64(legendGap))
}

// size is the figure's width and height: a fixed width, a row per variant,
// and the title, the time axis and the legend's rows.
func (f *figure) size() (w, h vg.Length) {
	_, rows := f.legendLayout()
	return figureSize(len(f.variants), len(rows), f.colTitles())
}

// figureSize is the size of a figure with rows variants and legendRows
// rows of legend.
func figureSize(rows, legendRows int, colTitles bool) (w, h vg.Length) {
	h = titleHeight + vg.Length(rows)*rowHeight + xAxisHeight + vg.Length(legendRows)*legendRowH + bottomPad
	if colTitles {
		h += colTitleH
	}
	return figWidth, h
}

// refLabel is a reference line's label in the margin.
type refLabel struct {
	text  string
	y     float64 // data units, for an in-range line
	off   bool    // off scale: pinned to the top edge
	color color.Color
}

// scaled is a figure with its y-ranges decided.
type scaled struct {
	lo, hi []float64 // per column
	// on[v][c][k] tells whether panel (v, c)'s k-th reference is drawn.
	on [][][]bool
}

// scale applies the axis rules (yRange, bandMax) to each column.
func (f *figure) scale() scaled {
	s := scaled{lo: make([]float64, len(f.cols)), hi: make([]float64, len(f.cols)), on: make([][][]bool, len(f.panels))}
	for v := range f.panels {
		s.on[v] = make([][]bool, len(f.cols))
	}
	for c, col := range f.cols {
		var dlo, dhi, top float64
		first := true
		var refs []float64
		for _, row := range f.panels {
			for _, d := range row[c].data {
				if lo, hi, ok := extent(d.xy); ok {
					if first {
						dlo, dhi, first = lo, hi, false
					}
					dlo, dhi = min(dlo, lo), max(dhi, hi)
				}
			}
			for _, r := range row[c].refs {
				_, hi, ok := extent(r.xy)
				if !ok {
					hi = 0
				}
				refs = append(refs, hi)
				top = max(top, hi)
			}
		}
		if col.band && top > 0 {
			dhi = bandMax(dhi, top)
		}
		lo, hi, on := yRange(dlo, dhi, refs)
		s.lo[c], s.hi[c] = lo, hi
		k := 0
		for v, row := range f.panels {
			s.on[v][c] = on[k : k+len(row[c].refs)]
			k += len(row[c].refs)
		}
	}
	return s
}

// marginLabels are panel (v, c)'s reference labels.
func (f *figure) marginLabels(s scaled, v, c int) []refLabel {
	var ls []refLabel
	for k, r := range f.panels[v][c].refs {
		if len(r.xy) == 0 {
			continue
		}
		last := r.xy[len(r.xy)-1].Y
		l := refLabel{text: r.name + " " + formatValue(last) + " " + f.cols[c].unit, y: last, color: f.colors[v]}
		if !s.on[v][c][k] {
			l.text += ", off scale ↑"
			l.off = true
		}
		ls = append(ls, l)
	}
	return ls
}

// render draws the figure in format ("png", "svg").
func (f *figure) render(format string) (io.WriterTo, error) {
	w, h := f.size()
	cw, err := draw.NewFormattedCanvas(w, h, format)
	if err != nil {
		return nil, fmt.Errorf("figure %s: %w", f.name, err)
	}
	dc := draw.New(cw)
	dc.SetColor(whiteColor)
	dc.Fill(dc.Rectangle.Path())

	s := f.scale()
	tick := textStyle(sans, 9, axisColor)
	margin := textStyle(sans, 9, axisColor)
	var marginW vg.Length
	for v := range f.panels {
		for c := range f.cols {
			for _, l := range f.marginLabels(s, v, c) {
				marginW = max(marginW, margin.Width(l.text))
			}
		}
	}
	// The SVG names its font rather than embedding it (which would add
	// a megabyte a file); a viewer without Liberation Sans draws wider
	// text, up to a sixth wider with DejaVu Sans.
	marginW = marginW*1.2 + 2*labelGap

	title := textStyle(sansBold, 12, color.Black)
	title.YAlign = text.YTop
	dc.FillText(title, vg.Point{X: dc.Min.X + 0.15*vg.Inch, Y: dc.Max.Y - 0.12*vg.Inch}, f.title)

	es, lrows := f.legendLayout()
	f.drawLegend(dc, es, lrows)

	grid := dc
	grid.Max.Y -= titleHeight
	if f.colTitles() {
		grid.Max.Y -= colTitleH
	}
	grid.Min.Y += vg.Length(len(lrows))*legendRowH + bottomPad
	plots := make([][]*plot.Plot, len(f.variants))
	for v := range f.variants {
		plots[v] = make([]*plot.Plot, len(f.cols))
		for c := range f.cols {
			p, err := f.panelPlot(s, v, c, tick)
			if err != nil {
				return nil, err
			}
			plots[v][c] = p
		}
	}
	label := textStyle(sansBold, 10, nil)
	tiles := draw.Tiles{Rows: len(f.variants), Cols: len(f.cols),
		PadTop: label.Height("M") + labelGap, PadY: label.Height("M") + 2*labelGap,
		PadX: marginW + labelGap, PadRight: marginW + labelGap, PadLeft: labelGap}
	cs := plot.Align(plots, tiles, grid)
	for v := range f.variants {
		for c := range f.cols {
			p := plots[v][c]
			p.Draw(cs[v][c])
			da := p.DataCanvas(cs[v][c])
			label.Color = f.colors[v]
			label.YAlign = text.YBottom
			dc.FillText(label, vg.Point{X: da.Min.X, Y: da.Max.Y + labelGap}, f.variants[v])
			if v == 0 && f.colTitles() {
				ct := textStyle(sans, 10, color.Black)
				ct.YAlign = text.YBottom
				dc.FillText(ct, vg.Point{X: da.Min.X, Y: da.Max.Y + labelGap + label.Height("M") + labelGap}, f.cols[c].title)
			}
			f.drawMarginLabels(dc, p, da, f.marginLabels(s, v, c), margin)
		}
	}
	return cw, nil
}

// panelPlot is the gonum plot of panel (v, c): grid, data, reference lines.
func (f *figure) panelPlot(s scaled, v, c int, tick text.Style) (*plot.Plot, error) {
	bottom := v == len(f.variants)-1
	p := plot.New()
	p.BackgroundColor = nil
	p.X.Padding, p.Y.Padding = 0, 0
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		// Only font and colour: the alignments are gonum's, per axis.
		a.Tick.Label.Font, a.Tick.Label.Color = tick.Font, tick.Color
		a.Label.TextStyle.Font, a.Label.TextStyle.Color = font.From(sans, 10), axisColor
		a.LineStyle.Color = axisColor
		a.Tick.LineStyle.Color = axisColor
	}
	p.X.Tick.Marker = plot.TickerFunc(func(lo, hi float64) []plot.Tick { return ticks(lo, hi, 8, bottom) })
	p.Y.Tick.Marker = plot.TickerFunc(func(lo, hi float64) []plot.Tick { return ticks(lo, hi, 4, true) })
	if bottom {
		p.X.Label.Text = f.xLabel
	}
	p.Y.Label.Text = f.cols[c].unit
	p.Add(gridLines{x: majors(f.xMin, f.xMax, 8), y: majors(s.lo[c], s.hi[c], 4)})
	pn := f.panels[v][c]
	for _, d := range pn.data {
		if len(d.xy) == 0 {
			continue
		}
		l, err := plotter.NewLine(envelope(d.xy, envelopeBuckets))
		if err != nil {
			return nil, fmt.Errorf("figure %s, %s %s: %w", f.name, f.variants[v], d.name, err)
		}
		l.Color, l.Width = f.colors[v], dataLineWidth
		p.Add(l)
	}
	for k, r := range pn.refs {
		if len(r.xy) == 0 || !s.on[v][c][k] {
			continue
		}
		xy := envelope(r.xy, envelopeBuckets)
		halo, err := plotter.NewLine(xy)
		if err != nil {
			return nil, fmt.Errorf("figure %s, %s %s: %w", f.name, f.variants[v], r.name, err)
		}
		halo.Color, halo.Width, halo.Dashes = whiteColor, refHalo, r.style.dashes()
		l, _ := plotter.NewLine(xy)
		l.Color, l.Width, l.Dashes = f.colors[v], refLineWidth, r.style.dashes()
		p.Add(halo, l)
	}
	// After Add, which widens the axes to the data; the data beyond the
	// ranges are clipped.
	p.X.Min, p.X.Max = f.xMin, f.xMax
	p.Y.Min, p.Y.Max = s.lo[c], s.hi[c]
	return p, nil
}

// majors are the values of the labelled ticks over [lo, hi].
func majors(lo, hi float64, n int) []float64 {
	var vs []float64
	for _, t := range ticks(lo, hi, n, true) {
		if t.Label != "" {
			vs = append(vs, t.Value)
		}
	}
	return vs
}

// gridLines draws light lines at the major ticks, under everything else.
type gridLines struct{ x, y []float64 }

func (g gridLines) Plot(c draw.Canvas, p *plot.Plot) {
	tx, ty := p.Transforms(&c)
	sty := draw.LineStyle{Color: gridColor, Width: 0.5}
	for _, x := range g.x {
		c.StrokeLine2(sty, tx(x), c.Min.Y, tx(x), c.Max.Y)
	}
	for _, y := range g.y {
		c.StrokeLine2(sty, c.Min.X, ty(y), c.Max.X, ty(y))
	}
}

// drawMarginLabels writes a panel's reference labels right of its data
// area, each at its line's height (spread apart when crowded), the off-scale
// ones at the top.
func (f *figure) drawMarginLabels(dc draw.Canvas, p *plot.Plot, da draw.Canvas, ls []refLabel, sty text.Style) {
	if len(ls) == 0 {
		return
	}
	_, ty := p.Transforms(&da)
	lineH := float64(sty.Height("M")) * 1.15
	want := make([]float64, len(ls))
	for i, l := range ls {
		if l.off {
			want[i] = float64(da.Max.Y) + lineH*float64(len(ls)-i)
		} else {
			want[i] = float64(ty(l.y))
		}
	}
	at := spreadLabels(want, lineH, float64(da.Min.Y)+lineH/2, float64(da.Max.Y))
	sty.YAlign = text.YCenter
	for i, l := range ls {
		sty.Color = l.color
		dc.FillText(sty, vg.Point{X: da.Max.X + labelGap, Y: vg.Length(at[i])}, l.text)
	}
}

// drawLegend draws the legend's rows at the bottom of the figure, each
// entry a sample of its line style and its name, in neutral ink.
func (f *figure) drawLegend(dc draw.Canvas, es []legendEntry, rows [][]int) {
	sty := textStyle(sans, 9, legendInk)
	sty.YAlign = text.YCenter
	for r, row := range rows {
		y := dc.Min.Y + bottomPad + vg.Length(len(rows)-r)*legendRowH - legendRowH/2
		x := dc.Min.X + legendGap
		for _, i := range row {
			e := es[i]
			ls := draw.LineStyle{Color: legendInk, Width: refLineWidth, Dashes: e.style.dashes()}
			dc.StrokeLine2(ls, x, y, x+legendSample, y)
			x += legendSample + labelGap
			dc.FillText(sty, vg.Point{X: x, Y: y}, e.name)
			x += sty.Width(e.name) + legendGap
		}
	}
}
