package lab

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// Settle waits for a disk to answer small synchronous writes as it does
// when idle. A sync(2) returns once the guest's data is written, but a
// virtual disk with a write-back cache in the host (this lab's) goes on
// writing it out there for seconds after, and a fdatasync's cache flush
// (blkdev_issue_flush) waits for that: an arm run right after another
// pays for the other's gigabytes. Each arm therefore begins once a round
// of Probes 4 KiB write+fdatasync pairs on File all complete within
// Bound, or after Limit.
type Settle struct {
	// File is the probe's file, made and removed by Wait.
	File string
	// Bound is the slowest write+fdatasync a settled disk answers.
	Bound time.Duration
	// Probes is the pairs a round; Limit the longest wait; Pause the
	// wait between rounds; Idle how long to wait before the first.
	Probes             int
	Limit, Pause, Idle time.Duration
}

// SettleProbes, SettleLimit and SettlePause are the usual Settle's.
const (
	SettleProbes = 32
	SettleLimit  = 2 * time.Minute
	SettlePause  = 500 * time.Millisecond
)

// Wait probes the disk until it has settled, or Limit has passed: it
// returns how long it waited, the slowest pair of the last round and
// whether that was within Bound.
func (s Settle) Wait(ctx context.Context) (waited, slowest time.Duration, settled bool, err error) {
	start := time.Now()
	// Idle before the probe's file exists: its creation is a write too.
	select {
	case <-ctx.Done():
		return 0, 0, false, ctx.Err()
	case <-time.After(s.Idle):
	}
	f, err := os.OpenFile(s.File, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return time.Since(start), 0, false, fmt.Errorf("settle probe: %w", err)
	}
	defer os.Remove(s.File)
	defer f.Close()
	buf := make([]byte, 4096)
	lat := make([]time.Duration, s.Probes)
	for {
		for i := range lat {
			t := time.Now()
			if _, err := f.WriteAt(buf, int64(i)*int64(len(buf))); err != nil {
				return time.Since(start), 0, false, fmt.Errorf("settle probe: %w", err)
			}
			if err := unix.Fdatasync(int(f.Fd())); err != nil {
				return time.Since(start), 0, false, fmt.Errorf("settle probe: fdatasync %s: %w", s.File, err)
			}
			lat[i] = time.Since(t)
		}
		slowest = slices.Max(lat)
		waited = time.Since(start)
		if slowest <= s.Bound || waited >= s.Limit {
			return waited, slowest, slowest <= s.Bound, nil
		}
		select {
		case <-ctx.Done():
			return time.Since(start), slowest, false, ctx.Err()
		case <-time.After(s.Pause):
		}
	}
}
