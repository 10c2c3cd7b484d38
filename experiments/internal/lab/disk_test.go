package lab

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseDiskStat(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, tc := range []struct {
		name, in     string
		want         DiskMark
		errSubstring string
	}{
		{name: "6.18 vda", in: "  47718     1519  4006178    40371  1064412   661108 86452346  3126766        0  1102504  3244712     9121        0 16784896     8052    93016    69522\n",
			want: DiskMark{writes: 1064412, written: 86452346 * 512, writeTime: ms(3126766), busy: ms(1102504), queue: ms(3244712),
				flushes: 93016, flushed: ms(69522), hasFlush: true, ok: true}},
		{name: "eleven fields (before discard and flush counters)", in: "1 2 3 4 5 6 7 8 9 10 11",
			want: DiskMark{writes: 5, written: 7 * 512, writeTime: ms(8), busy: ms(10), queue: ms(11), ok: true}},
		{name: "fifteen fields (discard, no flush counters)", in: "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15",
			want: DiskMark{writes: 5, written: 7 * 512, writeTime: ms(8), busy: ms(10), queue: ms(11), ok: true}},
		{name: "too few fields", in: "1 2 3 4 5 6 7 8 9 10", errSubstring: "10 fields, want at least 11"},
		{name: "sectors not a number", in: "1 2 3 4 5 6 x 8 9 10 11", errSubstring: `sectors written "x"`},
		{name: "io_ticks not a number", in: "1 2 3 4 5 6 7 8 9 -1 11", errSubstring: `io_ticks "-1"`},
		{name: "flush ticks not a number", in: "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 y", errSubstring: `flush ticks "y"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := parseDiskStat(tc.in)
			if tc.errSubstring != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errSubstring) {
					t.Fatalf("parseDiskStat(%q) = %v, want an error containing %q", tc.in, err, tc.errSubstring)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m != tc.want {
				t.Errorf("parseDiskStat(%q) = %+v, want %+v", tc.in, m, tc.want)
			}
		})
	}
}

// The block layer's means: 10 writes of 3 ms each on average, 4 requests
// in flight on average over 2 s, 5 flushes of 20 ms.
func TestDiskActivityMeans(t *testing.T) {
	t0 := time.Unix(100, 0)
	a := DiskMark{at: t0, writes: 100, writeTime: time.Second, queue: time.Second, flushes: 1, flushed: time.Second, hasFlush: true, ok: true}
	b := DiskMark{at: t0.Add(2 * time.Second), writes: 110, writeTime: time.Second + 30*time.Millisecond, queue: 9 * time.Second,
		flushes: 6, flushed: time.Second + 100*time.Millisecond, hasFlush: true, ok: true}
	got := b.Sub(a)
	if w, q, f := got.WriteLatencyMs(), got.MeanInFlight(), got.FlushLatencyMs(); math.Abs(w-3) > 1e-9 || math.Abs(q-4) > 1e-9 || math.Abs(f-20) > 1e-9 {
		t.Errorf("WriteLatencyMs, MeanInFlight, FlushLatencyMs = %v, %v, %v; want 3, 4, 20", w, q, f)
	}
	noFlush := b
	noFlush.hasFlush = false
	if f := noFlush.Sub(a).FlushLatencyMs(); !math.IsNaN(f) {
		t.Errorf("FlushLatencyMs without flush counters = %v, want NaN", f)
	}
	if w := a.Sub(a).WriteLatencyMs(); !math.IsNaN(w) {
		t.Errorf("WriteLatencyMs over no interval = %v, want NaN", w)
	}
}

func TestDiskMarkSub(t *testing.T) {
	t0 := time.Unix(100, 0)
	a := DiskMark{at: t0, written: 1 << 20, busy: time.Second, ok: true}
	for _, tc := range []struct {
		name       string
		b          DiskMark
		want       DiskActivity
		busy, rate float64 // BusyPercent, WriteMiBps when OK
	}{
		{name: "half busy", b: DiskMark{at: t0.Add(2 * time.Second), written: 3 << 20, busy: 2 * time.Second, ok: true},
			want: DiskActivity{Busy: 0.5, Written: 2 << 20, Wall: 2 * time.Second, OK: true}, busy: 50, rate: 1},
		// io_ticks is counted in jiffies and may run ahead of a short wall.
		{name: "capped at 1", b: DiskMark{at: t0.Add(10 * time.Millisecond), written: 1 << 20, busy: time.Second + 12*time.Millisecond, ok: true},
			want: DiskActivity{Busy: 1, Wall: 10 * time.Millisecond, OK: true}},
		{name: "unread mark", b: DiskMark{at: t0.Add(time.Second)}, want: DiskActivity{}},
		{name: "no time passed", b: DiskMark{at: t0, ok: true}, want: DiskActivity{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.b.Sub(a)
			if got != tc.want {
				t.Errorf("Sub = %+v, want %+v", got, tc.want)
			}
			busy, rate := got.BusyPercent(), got.WriteMiBps()
			if got.OK != !math.IsNaN(busy) || got.OK != !math.IsNaN(rate) {
				t.Errorf("BusyPercent, WriteMiBps = %v, %v: want numbers exactly when OK (%v)", busy, rate, got.OK)
			}
			if tc.busy != 0 && (busy != tc.busy || rate != tc.rate) {
				t.Errorf("BusyPercent, WriteMiBps = %v %%, %v MiB/s, want %v, %v", busy, rate, tc.busy, tc.rate)
			}
		})
	}
}

// Disk reads the real device under a directory: a file written and
// synced there shows in the bytes written. (The lab is built around its
// directory; this test makes only that part of it.)
func TestDiskSeesASyncedWrite(t *testing.T) {
	l := &Lab{Dir: t.TempDir()}
	before := l.Disk()
	if !before.ok {
		t.Skipf("no block device statistics under %s (tmpfs?)", l.Dir)
	}
	const size = 8 << 20
	p := filepath.Join(l.Dir, "f")
	if err := os.WriteFile(p, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	act := l.Disk().Sub(before)
	if !act.OK || act.Written < size {
		t.Errorf("after an 8 MiB write and fsync: %+v, want OK and at least %d bytes written", act, size)
	}
}
