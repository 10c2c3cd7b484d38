package memcg

import (
	"math"
	"testing"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    uint64
		wantErr bool
	}{
		{"4096", 4096, false},
		{"64M", 64 << 20, false},
		{"64m", 64 << 20, false},
		{"1G", 1 << 30, false},
		{"500m", 500 << 20, false},
		{"2k", 2048, false},
		{"0x1000", 4096, false}, // memparse uses base 0: C notation
		{"010", 8, false},
		{" 8M\n", 8 << 20, false}, // as written to a cgroupfs file
		{"16E", 0, true},          // overflows
		{"1.5G", 0, true},
		{"-1", 0, true},
		{"64MB", 0, true}, // memparse stops at B; we refuse the garbage
		{"", 0, true},
		{"M", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseSize(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseSize(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestFormatSizeRoundTrips(t *testing.T) {
	for _, n := range []uint64{0, 1, 4095, 4096, 64 << 20, 3663360, 1 << 60, 3 << 62, math.MaxUint64 - 1} {
		s := FormatSize(n)
		got, err := ParseSize(s)
		if err != nil || got != n {
			t.Errorf("ParseSize(FormatSize(%d) = %q) = %d, %v", n, s, got, err)
		}
	}
	if got := FormatSize(64 << 20); got != "64M" {
		t.Errorf("FormatSize(64M) = %q", got)
	}
	if got := FormatSize(NoLimit); got != "max" {
		t.Errorf("FormatSize(NoLimit) = %q, want max", got)
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"64M", "0x10k", "4096", "1E", "junk"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			return
		}
		back, err := ParseSize(FormatSize(n))
		if n != NoLimit && (err != nil || back != n) {
			t.Fatalf("%q parsed to %d, which does not round-trip (%d, %v)", s, n, back, err)
		}
	})
}
