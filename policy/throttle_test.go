package policy

import (
	"testing"
	"time"

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

func TestDebt(t *testing.T) {
	tests := []struct {
		dirtied      uint64
		think        time.Duration
		rate         uint64
		period, want time.Duration
	}{
		{1 << 20, 0, 100 << 20, 10 * time.Millisecond, 10 * time.Millisecond},
		{1 << 20, 4 * time.Millisecond, 100 << 20, 10 * time.Millisecond, 6 * time.Millisecond},
		{1 << 20, 50 * time.Millisecond, 100 << 20, 10 * time.Millisecond, -40 * time.Millisecond},
		{50 << 20, 0, 100 << 20, 500 * time.Millisecond, 500 * time.Millisecond},
	}
	for _, tt := range tests {
		period, pause := Debt(tt.dirtied, tt.think, tt.rate)
		if period != tt.period || pause != tt.want {
			t.Errorf("Debt(%d, %v, %d) = %v, %v, want %v, %v", tt.dirtied, tt.think, tt.rate, period, pause, tt.period, tt.want)
		}
	}
}

// A single fast writer on a slow device settles between the freerun
// ceiling and the limit, never past the limit, and is held near the
// device's speed: the first validation target of research §7.1 ("a single
// dd converges on dirty ≈ setpoint").
func TestThrottleHoldsAFastWriterBelowTheLimit(t *testing.T) {
	const (
		dirtyRate = 400 << 20 // the writer, bytes/s
		writeRate = 50 << 20  // the device
		step      = 10 * time.Millisecond
	)
	limits := memcg.DirtyLimits{Background: 8 << 20, Limit: 16 << 20}
	c := NewController()
	now := time.Unix(1000, 0)
	var dirty, written, dirtied float64
	var pausedUntil time.Time
	var maxDirty, sumDirty float64
	var samples int
	for i := 0; i < 2000; i++ {
		now = now.Add(step)
		if !now.Before(pausedUntil) {
			dirty += dirtyRate * step.Seconds()
			dirtied += dirtyRate * step.Seconds()
		}
		clean := min(dirty, writeRate*step.Seconds())
		dirty -= clean
		written += clean
		d := c.Step(Input{
			Now:   now,
			Stat:  memcg.Stat{Dirty: uint64(dirty), Limit: 1 << 30, Counters: memcg.Counters{HasWritten: true, WrittenBytes: uint64(written)}},
			Dirty: limits,
		})
		if d.Pause > MaxPause {
			t.Fatalf("pause %v above MAX_PAUSE", d.Pause)
		}
		if d.Pause > 0 {
			pausedUntil = now.Add(d.Pause)
		}
		if i > 1000 {
			maxDirty = max(maxDirty, dirty)
			sumDirty += dirty
			samples++
		}
	}
	mean := sumDirty / float64(samples)
	if maxDirty > float64(limits.Limit) {
		t.Errorf("dirty reached %.0f, past the limit %d", maxDirty, limits.Limit)
	}
	if mean < float64(limits.Freerun()) {
		t.Errorf("mean dirty %.0f below freerun %d: the writer was throttled too hard", mean, limits.Freerun())
	}
	rate := dirtied / (2000 * step.Seconds())
	if rate > 1.5*writeRate {
		t.Errorf("writer ran at %.0f B/s, far above the device's %d", rate, writeRate)
	}
	if bw := c.WriteBandwidth(); bw < writeRate*9/10 || bw > writeRate*11/10 {
		t.Errorf("write bandwidth estimate %d, device %d", bw, writeRate)
	}
	t.Logf("mean dirty %.1f MiB (freerun %.1f, limit %.1f), max %.1f MiB, writer %.1f MB/s on a %d MB/s device",
		mean/(1<<20), float64(limits.Freerun())/(1<<20), float64(limits.Limit)/(1<<20), maxDirty/(1<<20), rate/1e6, writeRate/1000000)
}

func TestDrainPause(t *testing.T) {
	tests := []struct {
		dirty, setpoint, bw uint64
		want                time.Duration
	}{
		{16 << 20, 12 << 20, 100 << 20, 40 * time.Millisecond},
		{12 << 20, 12 << 20, 100 << 20, MinPause},  // at the target: the shortest pause
		{100 << 20, 14 << 20, 100 << 20, MaxPause}, // never past MAX_PAUSE
		{16 << 20, 14 << 20, 0, MaxPause},
	}
	for _, tt := range tests {
		if got := DrainPause(tt.dirty, tt.setpoint, tt.bw); got != tt.want {
			t.Errorf("DrainPause(%d, %d, %d) = %v, want %v", tt.dirty, tt.setpoint, tt.bw, got, tt.want)
		}
	}
}
