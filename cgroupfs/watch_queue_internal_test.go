package cgroupfs

import (
	"testing"

	"github.com/memcgd/memcgd/host"
)

// The wake queue's promise, step by step as send drives it: reports of a
// queued cgroup coalesce until it is received, and a report that comes
// after the receipt but before the pop is not lost. The eBPF tracker
// reports once per Watch, so such a lost report left a writer unseen until
// the agent's next look (found by experiments/reaction: 10 of 11,000
// reports lost at load 11).
func TestWakeQueueKeepsAReportMadeAfterTheReceipt(t *testing.T) {
	tests := []struct {
		name string
		ops  []string // "push /x", "receive" (send's channel send returns), "pop"
		want []host.Cgroup
	}{
		{"reports before the receipt coalesce", []string{"push /a", "push /a", "receive", "pop"}, nil},
		{"a report after the receipt queues it again", []string{"push /a", "receive", "push /a", "pop"}, []host.Cgroup{"/a"}},
		{"another cgroup's reports are its own", []string{"push /a", "push /b", "receive", "push /b", "pop"}, []host.Cgroup{"/b"}},
		{"a cgroup queued again is received afresh", []string{"push /a", "receive", "push /a", "pop", "receive", "pop"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newWakeQueue(4)
			var received uint64
			for _, o := range tt.ops {
				switch o {
				case "receive":
					received = q.seq.Load() // as send does, right after the receipt
				case "pop":
					q.pop(received)
				default:
					q.push(host.Cgroup(o[len("push "):]))
				}
			}
			var got []host.Cgroup
			for q.n > 0 {
				cg, _ := q.front()
				got = append(got, cg)
				q.pop(q.seq.Load())
			}
			if len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) {
				t.Errorf("%v: left queued %v, want %v", tt.ops, got, tt.want)
			}
		})
	}
}
