package sched

import (
	"log/slog"
	"testing"
	"time"

	"github.com/memcgd/memcgd/memcg"
)

// BenchmarkPacedStep steps a paced cgroup as the tracker's reports do
// while a writer dirties it at full speed: each op is a report, the step
// it starts and whatever the decision hands out, carried out by the
// test's world. Its allocs/op are what one such step costs the daemon's
// garbage collector, the test world's results included.
//
//	go test ./sched -run '^$' -bench PacedStep -benchmem
func BenchmarkPacedStep(b *testing.B) {
	w := newWorld(b, Config{Policy: dirtyConfig(), Pacer: true, Tracker: true, Counter: true, Log: slog.LevelInfo},
		"/", root, "/pod", memcg.Stat{Limit: memcg.NoLimit}, "/pod/a", pacedStat(0, 6*mib))
	w.settle()
	w.set("/pod/a", func(s *memcg.Stat) { *s = pacedStat(0, 14*mib) })
	w.c.Kick(w.now, "/pod/a")
	w.advance(10 * ms)
	if !w.paced["/pod/a"].On() {
		b.Fatal("not paced at the setpoint")
	}
	var rs []Result
	level := uint64(14 * mib)
	for b.Loop() {
		// The level moves about the setpoint, the dirtied counter on.
		level = 12*mib + (level+mib/4)%(4*mib)
		w.set("/pod/a", func(s *memcg.Stat) {
			s.Dirty, s.Counters.DirtiedBytes = level, s.Counters.DirtiedBytes+mib/4
		})
		w.now = w.now.Add(500 * time.Microsecond)
		w.c.Report(w.now, "/pod/a")
		for {
			rd := w.c.Ready()
			if len(rd.Ops) == 0 {
				break
			}
			rs = rs[:0]
			for _, op := range rd.Ops {
				rs = append(rs, w.do(op))
			}
			w.c.Advance(w.now, rs...)
		}
		if dl := w.c.deadline(); !dl.IsZero() && !dl.After(w.now) {
			w.c.Tick(w.now)
		}
	}
}
