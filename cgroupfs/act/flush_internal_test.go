package act

import (
	"testing"
	"time"
)

// issue 9, defect 3: whatever asks, full flushes start at most once per
// Interval host-wide; a request for a filesystem being flushed is
// coalesced into that flush; at most MaxInFlight run at once. The clock
// is fake: 100 cgroups on 4 filesystems ask every 10 ms for 10 s.
func TestFlusherAdmitsOneFullFlushPerInterval(t *testing.T) {
	now := time.Unix(1000, 0)
	fl, err := NewFlusher(FlushOptions{Interval: time.Second, MaxInFlight: 2, now: func() time.Time { return now }}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	const (
		cgroups     = 100
		filesystems = 4
		flushTakes  = 1500 * time.Millisecond // longer than Interval: flushes overlap
		span        = 10 * time.Second
		tick        = 10 * time.Millisecond
	)
	end := now.Add(span)
	running := map[uint64]time.Time{} // filesystem -> when its flush ends
	var starts []time.Time
	counts := map[FlushResult]int{}
	maxRunning := 0
	for ; now.Before(end); now = now.Add(tick) {
		for dev, done := range running {
			if !now.Before(done) {
				fl.finish(dev)
				delete(running, dev)
			}
		}
		for cg := range cgroups {
			dev := uint64(cg % filesystems)
			r := fl.admit(dev)
			counts[r]++
			switch r {
			case FlushStarted:
				if _, ok := running[dev]; ok {
					t.Fatalf("%v: a second flush of filesystem %d started while one runs", now, dev)
				}
				running[dev] = now.Add(flushTakes)
				starts = append(starts, now)
			case FlushCoalesced:
				if _, ok := running[dev]; !ok {
					t.Fatalf("%v: coalesced into a flush of filesystem %d that is not running", now, dev)
				}
			}
		}
		maxRunning = max(maxRunning, len(running))
	}
	t.Logf("%v of requests from %d cgroups on %d filesystems: %v; %d flushes started, at most %d at once",
		span, cgroups, filesystems, counts, len(starts), maxRunning)
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < time.Second {
			t.Errorf("flushes started %v apart at %v, want at least 1s", gap, starts[i])
		}
	}
	if want := int(span / time.Second); len(starts) < want/2 || len(starts) > want {
		t.Errorf("%d flushes started in %v, want between %d and %d", len(starts), span, want/2, want)
	}
	if maxRunning > 2 {
		t.Errorf("%d flushes ran at once, want at most MaxInFlight 2", maxRunning)
	}
}

func TestFlushOptionsRefuseBadValues(t *testing.T) {
	for _, o := range []FlushOptions{{Interval: -1}, {MaxInFlight: -1}} {
		if _, err := o.withDefaults(); err == nil {
			t.Errorf("FlushOptions %+v: no error", o)
		}
	}
}
