package lab

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Wait returns after one round on a disk that answers within the bound,
// and after Limit, not settled, on one that never can; the probe's file
// is gone either way.
func TestSettleWaitsForTheBoundOrTheLimit(t *testing.T) {
	dir, err := os.MkdirTemp("/var/tmp", "settle-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	for _, tt := range []struct {
		name    string
		bound   time.Duration
		settled bool
		minWait time.Duration
		maxWait time.Duration
	}{
		{name: "within a generous bound: one round", bound: time.Minute, settled: true, maxWait: 10 * time.Second},
		{name: "an impossible bound: until the limit", bound: time.Nanosecond, settled: false, minWait: 300 * time.Millisecond, maxWait: 30 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := Settle{File: filepath.Join(dir, "probe"), Bound: tt.bound, Probes: 4, Limit: 300 * time.Millisecond, Pause: 50 * time.Millisecond}
			waited, slowest, settled, err := s.Wait(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if settled != tt.settled || waited < tt.minWait || waited > tt.maxWait || slowest <= 0 {
				t.Errorf("Wait: waited %v, slowest %v, settled %v; want settled %v after %v to %v", waited, slowest, settled, tt.settled, tt.minWait, tt.maxWait)
			}
			if _, err := os.Stat(s.File); !os.IsNotExist(err) {
				t.Errorf("probe file left behind: %v", err)
			}
		})
	}
}
