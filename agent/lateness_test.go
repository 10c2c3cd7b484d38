package agent

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/sched"
)

func TestLatenessCountsEachWakeUpInItsBucket(t *testing.T) {
	for _, tt := range []struct {
		late   time.Duration
		bucket int
	}{
		{0, 0},
		{-time.Millisecond, 0}, // a timer that fired early counts as on time
		{100 * time.Microsecond, 0},
		{101 * time.Microsecond, 1},
		{3 * time.Millisecond, 5},
		{250 * time.Millisecond, len(LatenessBounds) - 1},
		{time.Second, len(LatenessBounds)},
	} {
		var l lateness
		l.observe(tt.late)
		for i := range l.counts {
			if want := uint64(0); i == tt.bucket {
				want = 1
				if got := l.counts[i].Load(); got != want {
					t.Errorf("observe(%v): bucket %d holds %d; want %d", tt.late, i, got, want)
				}
			} else if got := l.counts[i].Load(); got != want {
				t.Errorf("observe(%v): bucket %d holds %d; want only bucket %d", tt.late, i, got, tt.bucket)
			}
		}
		if got, want := time.Duration(l.sum.Load()), max(tt.late, 0); got != want {
			t.Errorf("observe(%v): sum %v; want %v", tt.late, got, want)
		}
	}
}

// TestTheLoopCountsHowLateItWokeForItsTimers: in a bubble an idle loop
// wakes for its timers exactly on time; a loop kept busy past a deadline
// counts the delay.
func TestTheLoopCountsHowLateItWokeForItsTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newFakeHost(map[host.Cgroup]memcg.Stat{"/": root, "/a": {Limit: 100 * mib}})
		a, stop := run(t, Options{Host: h, ScanInterval: time.Second})
		time.Sleep(3500 * time.Millisecond) // three scans
		synctest.Wait()
		counts, sum := a.TimerLateness()
		if counts[0] < 3 || sum != 0 {
			t.Errorf("idle loop: lateness counts %v, sum %v; want three or more wake-ups, all on time", counts, sum)
		}
		// Keep the loop busy across the next scan's deadline, 0.5 s
		// away: it takes the scan up when the busy work ends.
		a.requests <- func(*sched.Core, time.Time) { time.Sleep(600 * time.Millisecond) }
		time.Sleep(time.Second)
		synctest.Wait()
		after, sum := a.TimerLateness()
		const hundred = 9 // LatenessBounds[9] is 100 ms
		if late := after[hundred] - counts[hundred]; LatenessBounds[hundred] != 100*time.Millisecond || late != 1 || sum != 100*time.Millisecond {
			t.Errorf("busy loop: lateness counts %v, sum %v; want one wake-up 100ms late, in the bucket up to 100ms", after, sum)
		}
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
}
