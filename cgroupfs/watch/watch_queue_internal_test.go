package watch

import (
	"slices"
	"strings"
	"testing"

	"github.com/memcgd/memcgd/host"
)

// The wake queue's promise, step by step as send drives it: reports of a
// queued cgroup coalesce until it is received, and a report that comes
// after a waiting receiver took it, before the pop, is not lost. The eBPF
// tracker reports once per Watch, so such a lost report left a writer
// unseen until the agent's next look (found by experiments/reaction: 10
// of 11,000 reports lost at load 11; and by
// TestTrackedWatcherReportsDirtiedAbove, 1 write in 300, once the
// tracker's wake-ups reached the Watcher without a hand-off between
// goroutines).
func TestWakeQueueKeepsAReportMadeAfterTheReceipt(t *testing.T) {
	tests := []struct {
		name string
		// ops: "push /x" (a kernel report), "once /x" (a report from a
		// source that reports once per Watch), "ready" (send takes the
		// front and the number of its latest report), "taken" (a
		// receiver that was waiting took the front), "waited" (send
		// waited for a receiver and has just seen the front taken).
		ops  []string
		want []host.Cgroup
	}{
		{"reports before a waiting receiver took it coalesce", []string{"push /a", "once /a", "ready", "taken"}, nil},
		{"a report after a waiting receiver took it queues it again", []string{"push /a", "ready", "push /a", "taken"}, []host.Cgroup{"/a"}},
		{"the kernel's reports made while the sender waited coalesce", []string{"push /a", "ready", "push /a", "push /a", "waited"}, nil},
		{"a once-per-Watch report made while the sender waited queues it again", []string{"push /a", "ready", "once /a", "waited"}, []host.Cgroup{"/a"}},
		{"another cgroup's reports are its own", []string{"push /a", "push /b", "ready", "push /b", "taken"}, []host.Cgroup{"/b"}},
		{"a cgroup queued again is received afresh", []string{"once /a", "ready", "once /a", "taken", "ready", "taken"}, nil},
		{"queued again, the kernel's reports while the sender waits still coalesce", []string{"once /a", "ready", "once /a", "taken", "ready", "push /a", "waited"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newWakeQueue(4)
			var seen uint64
			for _, o := range tt.ops {
				op, arg, _ := strings.Cut(o, " ")
				switch op {
				case "push", "once":
					q.push(host.Cgroup(arg), op == "once")
				case "ready":
					_, seen, _ = q.front()
				case "taken":
					q.pop(seen, false)
				case "waited":
					q.pop(seen, true)
				default:
					t.Fatalf("unknown op %q", o)
				}
			}
			var got []host.Cgroup
			for q.n > 0 {
				cg, seen, _ := q.front()
				got = append(got, cg)
				q.pop(seen, false)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("%v: left queued %v, want %v", tt.ops, got, tt.want)
			}
		})
	}
}
