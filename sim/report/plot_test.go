package report

import (
	"bytes"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"

	"github.com/memcgd/memcgd/sim/run"
	"github.com/memcgd/memcgd/sim/scenario"
)

// figureHeight is a figure's height in pixels as docs/sim.md states it: 0.4
// in of title, 1.4 in per variant, 0.45 in of time axis, 0.22 in per
// legend row and 0.08 in below, plus 0.2 in of column titles when there
// are two columns; at 96 dpi.
func figureHeight(variants, legendRows int, colTitles bool) int {
	in := 0.4 + 1.4*float64(variants) + 0.45 + 0.22*float64(legendRows) + 0.08
	if colTitles {
		in += 0.2
	}
	return int(math.Round(in * 96))
}

// Plots writes dirty, usage and throughput as PNG and SVG and returns the
// paths in that order; every PNG decodes, 9 in (864 px) wide, a row per
// variant high. The run has seed 001's watermarks (its kswapd variant), so
// usage has a second column, of free pages against them.
func TestPlotsWritesTheFilesItLists(t *testing.T) {
	sc, rs := results(t)
	dir := t.TempDir()
	files, err := Plots(dir, sc, rs)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range []string{"dirty", "usage", "throughput"} {
		want = append(want, filepath.Join(dir, f+".png"), filepath.Join(dir, f+".svg"))
	}
	if !slices.Equal(files, want) {
		t.Fatalf("Plots listed %q, want %q", files, want)
	}
	heights := map[string]int{
		"dirty.png":      figureHeight(2, 1, false),
		"usage.png":      figureHeight(2, 1, true),
		"throughput.png": figureHeight(2, 1, false),
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("listed but not written: %v", err)
			continue
		}
		if strings.HasSuffix(name, ".svg") {
			if !bytes.Contains(b, []byte("<svg")) {
				t.Errorf("%s is not SVG", name)
			}
			continue
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		w, h := img.Bounds().Dx(), img.Bounds().Dy()
		if want := heights[filepath.Base(name)]; w != 864 || h != want {
			t.Errorf("%s is %dx%d, want 864x%d", name, w, h, want)
		}
	}
}

// A figure whose data are zero throughout in every variant is not written
// (or listed): a reader's run has no dirty pages and no disk writes.
func TestPlotsLeavesOutAllZeroFigures(t *testing.T) {
	sc, err := scenario.Parse([]byte(`version: 1
name: r
until: 10s
sample: 100ms
machine: {memory: 2G, cgroup: v1}
disks: [{name: vda, write_bandwidth: 100M, read_bandwidth: 100M}]
cgroups: [{path: /r, limit: 64M}]
workloads: [{name: cat, kind: reader, cgroup: /r, size: 128M, block: 512K}]
variants: [{name: stock}]
report: {table: seed-001}
`))
	if err != nil {
		t.Fatal(err)
	}
	r, err := run.Variant(sc, sc.Variants[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files, err := Plots(dir, sc, []*run.Result{r})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(dir, "usage.png"), filepath.Join(dir, "usage.svg")}; !slices.Equal(files, want) {
		t.Errorf("Plots listed %q, want %q", files, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "dirty.png")); !os.IsNotExist(err) {
		t.Errorf("dirty.png: %v, want it absent", err)
	}
}

// Every figure of a run gives a variant the same colour.
func TestFiguresShareTheVariantColours(t *testing.T) {
	sc, rs := results(t)
	figs := figures(sc, rs)
	for _, f := range figs[1:] {
		if !slices.Equal(f.variants, figs[0].variants) || !slices.Equal(f.colors, figs[0].colors) {
			t.Errorf("%s: variants %v colours %v; %s: %v %v", f.name, f.variants, f.colors, figs[0].name, figs[0].variants, figs[0].colors)
		}
	}
	if figs[0].colors[0] == figs[0].colors[1] {
		t.Errorf("stock and kswapd share %v", figs[0].colors[0])
	}
}

// Seed 004's case: a threshold 15 times the data is labelled off scale at
// the top of the margin and not drawn, so the axis stays on the data; the
// patch's 20 MiB threshold in the next row is drawn and labelled at its
// height.
func TestFigureLabelsAnOffScaleThreshold(t *testing.T) {
	flat := func(y float64) plotter.XYs { return plotter.XYs{{X: 0, Y: y}, {X: 10, Y: y}} }
	f := &figure{name: "dirty", cols: []column{{unit: "MiB"}}, variants: []string{"stock", "patch"},
		colors: variantColors([]string{"stock", "patch"}),
		panels: [][]panel{
			{{data: []series{{name: "d", xy: flat(100)}}, refs: []series{{name: "dirty_thresh", style: dashed, xy: flat(1530.086)}}}},
			{{data: []series{{name: "d", xy: flat(19)}}, refs: []series{{name: "dirty_thresh", style: dashed, xy: flat(19.99)}}}},
		}}
	s := f.scale()
	if s.lo[0] != 0 || math.Abs(s.hi[0]-105) > 1e-9 {
		t.Errorf("y-range [%v, %v], want [0, 105]", s.lo[0], s.hi[0])
	}
	for _, tc := range []struct {
		row  int
		text string
		off  bool
	}{{0, "dirty_thresh 1530 MiB, off scale ↑", true}, {1, "dirty_thresh 20 MiB", false}} {
		ls := f.marginLabels(s, tc.row, 0)
		if len(ls) != 1 || ls[0].text != tc.text || ls[0].off != tc.off {
			t.Errorf("row %d labels %+v, want %q (off scale %v)", tc.row, ls, tc.text, tc.off)
		}
	}
}
