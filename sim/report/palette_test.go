package report

import (
	"image/color"
	"testing"
)

// variantColors: stock and memcgd have fixed colours; every variant of a
// run has its own colour while the pool lasts; a name keeps its colour
// from run to run unless an earlier variant of the run took it.
func TestVariantColors(t *testing.T) {
	alone := func(n string) color.Color { return variantColors([]string{n})[0] }
	for _, tc := range []struct {
		name  string
		run   []string
		check func(t *testing.T, cs []color.Color)
	}{
		{"stock is dark grey and memcgd blue, in any run", []string{"memcgd", "x", "stock"}, func(t *testing.T, cs []color.Color) {
			if cs[0] != memcgdColor || cs[2] != stockColor {
				t.Errorf("memcgd %v, stock %v", cs[0], cs[2])
			}
		}},
		{"seed 001: memcg-kswapd has the colour it has alone", []string{"stock", "memcg-kswapd", "memcgd"}, func(t *testing.T, cs []color.Color) {
			if cs[1] != alone("memcg-kswapd") {
				t.Errorf("memcg-kswapd %v here, %v alone", cs[1], alone("memcg-kswapd"))
			}
		}},
		{"seed 004: four colours", []string{"stock", "memcg-dirty-limit", "stock-2.6.33", "memcgd"}, distinct(4)},
		{"daemon-reaction: six colours", []string{"stock", "open-50ms", "closed-poll", "closed-trk-1ms", "closed-trk-50ms", "open-trk-1ms"}, distinct(6)},
		{"as many other variants as the pool: all distinct", []string{"a", "b", "c", "d", "e", "f"}, distinct(len(variantPool))},
		{"one past the pool repeats a colour, and only one", []string{"a", "b", "c", "d", "e", "f", "g"}, func(t *testing.T, cs []color.Color) {
			seen := map[color.Color]int{}
			for _, c := range cs {
				seen[c]++
			}
			if len(seen) != len(variantPool) {
				t.Errorf("%d colours for %d variants, want %d", len(seen), len(cs), len(variantPool))
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := variantColors(tc.run)
			if len(cs) != len(tc.run) {
				t.Fatalf("%d colours for %d variants", len(cs), len(tc.run))
			}
			tc.check(t, cs)
		})
	}
	// Two names that hash to one pool colour (seven names into six
	// colours must have such a pair): the second of a run takes another.
	names := []string{"a", "b", "c", "d", "e", "f", "g"}
	for i, x := range names {
		for _, y := range names[i+1:] {
			if alone(x) != alone(y) {
				continue
			}
			if cs := variantColors([]string{x, y}); cs[0] != alone(x) || cs[1] == cs[0] {
				t.Errorf("%s and %s share %v alone; in one run they got %v and %v", x, y, alone(x), cs[0], cs[1])
			}
			return
		}
	}
	t.Error("no two of seven names share a colour alone: the pool is larger than six")
}

func distinct(n int) func(t *testing.T, cs []color.Color) {
	return func(t *testing.T, cs []color.Color) {
		seen := map[color.Color]bool{}
		for _, c := range cs {
			seen[c] = true
		}
		if len(seen) != n {
			t.Errorf("%d distinct colours %v, want %d", len(seen), cs, n)
		}
	}
}
