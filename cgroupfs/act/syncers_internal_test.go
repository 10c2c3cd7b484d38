package act

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// A device is syncing from the read that finds its flush count grown, if
// the read before was within SyncWindow, until SyncWindow after that
// read; its stat file is read at most every syncReadGap, and one that is
// missing, or counts no flushes, is never syncing and read again only
// after syncRetry.
func TestSyncersSeeAFlushWithinTheWindow(t *testing.T) {
	type syncStep struct {
		at        time.Duration
		file      string // the stat file; "" missing
		want      bool
		wantReads int // reads so far
	}
	const ms = time.Millisecond
	stat := func(flushes int) string {
		return fmt.Sprintf("1 2 3 4 5 6 7 8 0 10 11 0 0 0 0 %d 17\n", flushes)
	}
	for _, tt := range []struct {
		name  string
		steps []syncStep
	}{
		{"a device that flushes now and then", []syncStep{
			{0, stat(10), false, 1},        // a first reading: when it grew is unknown
			{2 * ms, stat(11), false, 1},   // within the read gap: not read
			{10 * ms, stat(10), false, 2},  // unchanged
			{20 * ms, stat(12), true, 3},   // grew since a read 10 ms before
			{50 * ms, stat(12), true, 4},   // unchanged, within the window of the growth
			{130 * ms, stat(12), false, 5}, // 110 ms after it
			{400 * ms, stat(15), false, 6}, // grew, but since a read 270 ms before
			{405 * ms, stat(16), true, 7},  // grew since a read 5 ms before
			{460 * ms, stat(16), true, 8},  // still within it
			{506 * ms, stat(16), false, 9}, // 101 ms after it
		}},
		{"no stat file", []syncStep{
			{0, "", false, 1},
			{500 * ms, stat(10), false, 1},  // not looked for again within syncRetry
			{1000 * ms, stat(10), false, 2}, // found: a first reading
			{1010 * ms, stat(11), true, 3},
		}},
		{"a kernel that counts no flushes", []syncStep{
			{0, "1 2 3 4 5 6 7 8 0 10 11 0 0 0 0\n", false, 1},
			{10 * ms, "1 2 3 4 5 6 7 8 0 10 11 0 0 0 0\n", false, 1},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t0 := time.Unix(1000, 0)
			var now time.Time
			var file string
			reads := 0
			s := NewSyncers("/sys")
			s.now = func() time.Time { return now }
			s.read = func(p string) ([]byte, error) {
				if p != "/sys/dev/block/8:1/stat" {
					t.Errorf("read %s, want /sys/dev/block/8:1/stat", p)
				}
				reads++
				if file == "" {
					return nil, os.ErrNotExist
				}
				return []byte(file), nil
			}
			const dev = 8<<8 | 1 // 8:1 in the old encoding, as unix.Mkdev(8, 1)
			for _, st := range tt.steps {
				now, file = t0.Add(st.at), st.file
				if got := s.Syncing(dev); got != st.want || reads != st.wantReads {
					t.Errorf("at %v: syncing %v after %d reads, want %v after %d", st.at, got, reads, st.want, st.wantReads)
				}
			}
		})
	}
}
