package main

import (
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memcgd/memcgd/experiments/internal/lab"
)

// runFor runs the loop of c on a locked thread for d and returns its
// report.
func runFor(t *testing.T, c config, d time.Duration) lab.VictimResult {
	t.Helper()
	l, err := newLoop(c)
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	type out struct {
		res lab.VictimResult
		err error
	}
	done := make(chan out)
	go func() {
		runtime.LockOSThread()
		res, err := l.run(&stop, func(error) {})
		done <- out{res, err}
	}()
	time.Sleep(d)
	stop.Store(true)
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.res
}

func TestSyncLoopWritesABlockPerSync(t *testing.T) {
	file := filepath.Join(t.TempDir(), "log")
	res := runFor(t, config{mode: lab.VictimSync, file: file, block: 4 << 10, slow: time.Second}, 100*time.Millisecond)
	if res.Ops == 0 || res.Bytes != res.Ops*4<<10 {
		t.Fatalf("%d syncs wrote %d bytes, want at least one sync and 4 KiB each", res.Ops, res.Bytes)
	}
	st, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(st.Size()) != res.Bytes {
		t.Errorf("file holds %d bytes, the report says %d", st.Size(), res.Bytes)
	}
	if res.WriteTime+res.SyncTime > res.Wall || res.Latency.Max > res.Wall || res.Latency.P50 > res.Latency.Max {
		t.Errorf("times inconsistent: write %v + sync %v, latencies %+v, over a wall of %v", res.WriteTime, res.SyncTime, res.Latency, res.Wall)
	}
}

func TestSleepLoopCountsWakeUps(t *testing.T) {
	res := runFor(t, config{mode: lab.VictimSleep, interval: time.Millisecond, slow: time.Second}, 100*time.Millisecond)
	// Each loop sleeps at least the interval: no more loops than the
	// wall time holds.
	if res.Ops == 0 || time.Duration(res.Ops)*time.Millisecond > res.Wall {
		t.Errorf("%d wake-ups of 1 ms sleeps in %v", res.Ops, res.Wall)
	}
	if res.Sched.Slices < res.Ops {
		t.Errorf("%d wake-ups but the thread was put on a CPU %d times, want at least once per wake-up", res.Ops, res.Sched.Slices)
	}
}

func TestWriteLoopKeepsItsPace(t *testing.T) {
	const chunk, rate = 64 << 10, 4 << 20 // 64 chunks a second
	res := runFor(t, config{mode: lab.VictimWrite, file: filepath.Join(t.TempDir(), "f"), chunk: chunk, rate: rate, slow: time.Second},
		500*time.Millisecond)
	// The bucket starts full: at most one chunk over the pace.
	if max := uint64(res.Wall.Seconds()*rate) + chunk; res.Bytes > max || res.Bytes != res.Ops*chunk {
		t.Errorf("%d writes wrote %d bytes in %v, want %d bytes each and at most %d", res.Ops, res.Bytes, res.Wall, chunk, max)
	}
}

func TestNewLoopRefusesBadFlags(t *testing.T) {
	for _, c := range []config{
		{mode: "nap"},
		{mode: lab.VictimSleep},
		{mode: lab.VictimSync, block: 4096},
		{mode: lab.VictimWrite, file: filepath.Join(t.TempDir(), "f")},
	} {
		if _, err := newLoop(c); err == nil {
			t.Errorf("newLoop(%+v): no error", c)
		}
	}
}
