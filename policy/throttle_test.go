package policy

import (
	"testing"

	"github.com/memcgd/memcgd/memcg"
)

func TestPosRatio(t *testing.T) {
	// setpoint 1000 pages, limit 2000: freerun is 0 (setpoint is halfway
	// between freerun and limit).
	tests := []struct {
		name                   string
		setpoint, dirty, limit int64
		want                   int64
	}{
		// x = (1000<<10)/(1000|1) = 1022, so "2.0" is 2042 in the kernel too
		{"2.0 at the freerun ceiling", 1000, 0, 2000, 2042},
		{"1.0 at the setpoint", 1000, 1000, 2000, 1024},
		{"0 at the limit", 1000, 2000, 2000, 0},
		{"0 past the limit", 1000, 2500, 2000, 0},
		// x = (500<<10)/1001 = 511; 511^3 >> 20 = 127 (two truncating shifts)
		{"above 1.0 below the setpoint", 1000, 500, 2000, 1151},
		// x = -511; 255 * -511 >> 10 = -128 with an arithmetic shift, as gcc does
		{"below 1.0 above the setpoint", 1000, 1500, 2000, 896},
		{"clamped at 2.0 far below freerun", 1000, -5000, 2000, 2048},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PosRatio(tt.setpoint, tt.dirty, tt.limit); got != tt.want {
				t.Errorf("PosRatio(%d, %d, %d) = %d, want %d", tt.setpoint, tt.dirty, tt.limit, got, tt.want)
			}
		})
	}
}

func TestDirtySetpoint(t *testing.T) {
	d := memcg.DirtyLimits{Background: 8 << 20, Limit: 16 << 20}
	// freerun 12M; setpoint (12M + 16M) / 2 = 14M
	if sp, lim := DirtySetpoint(d, 0); sp != 14<<20 || lim != 16<<20 {
		t.Errorf("DirtySetpoint = %d, %d, want 14M, 16M", sp, lim)
	}
	// hard_dirty_limit: a trailing domain limit above thresh wins
	if sp, lim := DirtySetpoint(d, 20<<20); sp != 16<<20 || lim != 20<<20 {
		t.Errorf("DirtySetpoint with trailing 20M = %d, %d, want 16M, 20M", sp, lim)
	}
}
