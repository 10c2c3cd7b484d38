package memcg

import "testing"

func TestWatermarks(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name  string
		knobs Knobs
		limit uint64
		want  Watermarks
	}{
		{
			// seed 001: "echo 500m > memory.limit_in_bytes ... low_wmark
			// 3663360 high_wmark 4396032", one min sized from the limit.
			name:  "seed 001: 500m limit gives low_wmark 3663360 and high_wmark 4396032",
			knobs: Knobs{MinFreeKbytes: MinFreeAuto},
			limit: 500 * mib,
			want:  Watermarks{Min: 2862 << 10, Low: 3663360, High: 4396032},
		},
		{
			name:  "seed 001: the same pair from an explicit min_free_kbytes 2862",
			knobs: Knobs{MinFreeKbytes: 2862},
			limit: 4096 * mib,
			want:  Watermarks{Min: 2862 << 10, Low: 3663360, High: 4396032},
		},
		{
			name:  "seed 001: writing 0 to min_free_kbytes disables per cgroup kswapd",
			knobs: Knobs{MinFreeKbytes: 0},
			limit: 500 * mib,
			want:  Watermarks{},
		},
		{
			name:  "no limit, nothing to keep free",
			knobs: Knobs{MinFreeKbytes: 4096},
			limit: NoLimit,
			want:  Watermarks{},
		},
		{
			name:  "auto min is clamped to 128 KiB for tiny limits",
			knobs: Knobs{MinFreeKbytes: MinFreeAuto},
			limit: 1 * mib, // sqrt(1024*16) = 128
			want:  Watermarks{Min: 128 << 10, Low: 160 << 10, High: 192 << 10},
		},
		{
			name:  "a high mark above half the limit is capped there",
			knobs: Knobs{MinFreeKbytes: 65536},
			limit: 64 * mib,
			want:  Watermarks{Min: 64 * mib / 2 * 2 / 3, Low: 64 * mib / 2 * 5 / 6, High: 32 * mib},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.knobs.Watermarks(tt.limit)
			if got != tt.want {
				t.Errorf("Watermarks(%d) = %+v, want %+v", tt.limit, got, tt.want)
			}
			if got.Enabled() != (tt.want.High > 0) {
				t.Errorf("Enabled() = %v", got.Enabled())
			}
		})
	}
}

func TestDefaultMinFreeKbytes(t *testing.T) {
	tests := []struct {
		limit uint64
		want  uint64
	}{
		{500 << 20, 2862},  // seed 001
		{16 << 30, 16384},  // kernel comment: 16 GiB -> ~16 MiB
		{64 << 30, 32768},  // 64 GiB -> ~32 MiB
		{64 << 40, 262144}, // clamped at the kernel's upper bound
		{4 << 20, 256},     // sqrt(4096*16)
		{1 << 10, 128},     // lower clamp
		{NoLimit, 0},       // nothing to size from
	}
	for _, tt := range tests {
		if got := DefaultMinFreeKbytes(tt.limit); got != tt.want {
			t.Errorf("DefaultMinFreeKbytes(%d) = %d, want %d", tt.limit, got, tt.want)
		}
	}
}

func TestIsqrt(t *testing.T) {
	for _, x := range []uint64{0, 1, 2, 3, 4, 15, 16, 17, 8192000, 1<<62 + 12345, 1<<64 - 1} {
		r := isqrt(x)
		// (r+1)^2 may overflow for the largest x; compare via division.
		if r*r > x || (r+1) <= x/(r+1) {
			t.Errorf("isqrt(%d) = %d", x, r)
		}
	}
}
