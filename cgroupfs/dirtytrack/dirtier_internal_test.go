package dirtytrack

import (
	"slices"
	"testing"
	"time"
)

// dirtiersOf lists a ring's threads youngest first, skips empty entries,
// and reads ages across the wrap of the program's 32-bit millisecond clock.
func TestDirtiersOf(t *testing.T) {
	ring := func(n uint64, es ...[2]uint32) dirtytrackDirtiers {
		d := dirtytrackDirtiers{N: n}
		for i, e := range es {
			d.T[i].Tid, d.T[i].Ms = e[0], e[1]
		}
		return d
	}
	const wrap = 1 << 32
	tests := []struct {
		name string
		d    dirtytrackDirtiers
		now  uint32
		want []Dirtier
	}{
		{"empty", ring(0), 1000, []Dirtier{}},
		{"youngest first", ring(3, [2]uint32{10, 900}, [2]uint32{11, 990}, [2]uint32{12, 500}), 1000,
			[]Dirtier{{11, 10 * time.Millisecond}, {10, 100 * time.Millisecond}, {12, 500 * time.Millisecond}}},
		{"same age by TID", ring(2, [2]uint32{20, 1000}, [2]uint32{7, 1000}), 1000,
			[]Dirtier{{7, 0}, {20, 0}}},
		{"across the clock's wrap", ring(1, [2]uint32{5, wrap - 30}), 20,
			[]Dirtier{{5, 50 * time.Millisecond}}},
		{"a time ahead of now reads as 0", ring(1, [2]uint32{5, 1003}), 1000,
			[]Dirtier{{5, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := dirtiersOf(tt.d, tt.now); !slices.Equal(got, tt.want) {
				t.Errorf("dirtiersOf = %v, want %v", got, tt.want)
			}
		})
	}
}
