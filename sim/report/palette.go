package report

import (
	"hash/fnv"
	"image/color"
)

// The variants' colours. A variant has one colour in every figure of a run,
// keyed by its name, so that the eye follows it from dirty.png to
// throughput.png; quantities of one variant differ by line style instead.

// The palette; read only.
var (
	// stockColor is the baseline's: a neutral dark grey.
	stockColor = color.RGBA{0x33, 0x33, 0x33, 0xff}
	// memcgdColor is memcgd's: Okabe–Ito blue.
	memcgdColor = color.RGBA{0x00, 0x72, 0xb2, 0xff}
)

// variantPool holds the colours of the other variants: the Okabe–Ito
// palette for colour-blind readers without its blues (memcgd's), its black
// (stock's dark grey is close) and its yellow (too light on white), and
// Paul Tol's wine and olive after them; all dark enough for a label.
var variantPool = []color.RGBA{
	{0xd5, 0x5e, 0x00, 0xff}, // vermillion
	{0x00, 0x9e, 0x73, 0xff}, // bluish green
	{0xcc, 0x79, 0xa7, 0xff}, // reddish purple
	{0xe6, 0x9f, 0x00, 0xff}, // orange
	{0x88, 0x22, 0x55, 0xff}, // wine
	{0x99, 0x99, 0x33, 0xff}, // olive
}

// variantColors gives the variants of a run, in order, their colours.
// "stock" is always dark grey and "memcgd" always blue. Any other name takes
// the pool colour its FNV-1a hash selects, or the next one an earlier
// variant of the run has not taken; so a name keeps its colour across the
// figures of a run, and across runs unless two names meet on one colour.
// Past len(variantPool) such variants, colours repeat.
func variantColors(names []string) []color.Color {
	out := make([]color.Color, len(names))
	taken := make([]bool, len(variantPool))
	free := len(variantPool)
	for i, n := range names {
		switch n {
		case "stock":
			out[i] = stockColor
			continue
		case "memcgd":
			out[i] = memcgdColor
			continue
		}
		h := fnv.New32a()
		h.Write([]byte(n))
		slot := int(h.Sum32() % uint32(len(variantPool)))
		if free == 0 {
			out[i] = variantPool[slot]
			continue
		}
		for taken[slot] {
			slot = (slot + 1) % len(variantPool)
		}
		taken[slot] = true
		free--
		out[i] = variantPool[slot]
	}
	return out
}
