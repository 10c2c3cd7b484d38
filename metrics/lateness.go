package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// WithTimerLateness exports how late the daemon's loop woke for its
// timers as the histogram memcgd_timer_lateness_seconds: late returns the
// count in each bucket of bounds (not cumulative; one more, past every
// bound) and the sum.
func WithTimerLateness(bounds []time.Duration, late func() (counts []uint64, sum time.Duration)) Option {
	return func(r *Registry) error {
		return r.own.Register(lateness{bounds: bounds, late: late,
			desc: prometheus.NewDesc("memcgd_timer_lateness_seconds",
				"How late the daemon's loop woke for its timers (a paced cgroup's look, a thaw, a refreeze, a scan), from the deadline: its reaction delay, which grows when the node's CPUs are busier than the daemon's share or the machine is stopped, and loosens the throttle's hold.",
				nil, nil)})
	}
}

type lateness struct {
	bounds []time.Duration
	late   func() ([]uint64, time.Duration)
	desc   *prometheus.Desc
}

func (l lateness) Describe(ch chan<- *prometheus.Desc) { ch <- l.desc }

func (l lateness) Collect(ch chan<- prometheus.Metric) {
	counts, sum := l.late()
	buckets := make(map[float64]uint64, len(l.bounds))
	var n uint64
	for i, c := range counts {
		n += c
		if i < len(l.bounds) {
			buckets[l.bounds[i].Seconds()] = n
		}
	}
	ch <- prometheus.MustNewConstHistogram(l.desc, n, sum.Seconds(), buckets)
}
