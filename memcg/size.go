package memcg

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// ParseSize parses a size as the kernel's memparse() does (lib/cmdline.c):
// an unsigned integer in C notation (decimal, 0x hex or 0 octal) followed by
// an optional binary suffix K, M, G, T, P or E in either case. "64M" is
// 67108864 bytes. Unlike memparse, trailing garbage and overflow are errors.
func ParseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("empty size")
	}
	shift := uint(0)
	switch t[len(t)-1] {
	case 'k', 'K':
		shift = 10
	case 'm', 'M':
		shift = 20
	case 'g', 'G':
		shift = 30
	case 't', 'T':
		shift = 40
	case 'p', 'P':
		shift = 50
	case 'e', 'E':
		shift = 60
	}
	if shift > 0 {
		t = t[:len(t)-1]
	}
	n, err := strconv.ParseUint(t, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size: want a number with an optional K, M, G, T, P or E suffix", s)
	}
	if shift > 0 && n > math.MaxUint64>>shift {
		return 0, fmt.Errorf("%q overflows 64 bits", s)
	}
	return n << shift, nil
}

// FormatSize renders n bytes in the largest binary unit that divides it
// exactly, so that ParseSize(FormatSize(n)) == n.
func FormatSize(n uint64) string {
	if n == NoLimit {
		return "max"
	}
	if n == 0 {
		return "0"
	}
	units := "KMGTPE"
	shift := bits.TrailingZeros64(n) / 10
	if shift > len(units) {
		shift = len(units)
	}
	if shift == 0 {
		return strconv.FormatUint(n, 10)
	}
	return strconv.FormatUint(n>>(10*shift), 10) + units[shift-1:shift]
}
