package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// WithCallCPU exports calls, the CPU time the daemon's workers spent in
// each kind of host call, as memcgd_host_call_cpu_seconds_total{call}: a
// write-out's and a reclaim's are mostly the kernel's work done on the
// daemon's threads (submitting writeback, reclaiming), which the
// process's CPU counter includes.
func WithCallCPU(calls func() map[string]time.Duration) Option {
	return func(r *Registry) error {
		return r.own.Register(byCall[time.Duration]{calls: calls, value: time.Duration.Seconds,
			desc: prometheus.NewDesc("memcgd_host_call_cpu_seconds_total",
				"CPU time the daemon's workers spent carrying out host calls, by call: write out, flush and reclaim are mostly the kernel's work (submitting writeback, reclaiming); observe is reading the cgroups' files.",
				[]string{"call"}, nil)})
	}
}

// WithCalls exports calls, how many host calls of each kind the daemon
// carried out, as memcgd_host_calls_total{call}: observe counts the
// daemon's steps (looks at a cgroup), its wake-ups' cost.
func WithCalls(calls func() map[string]uint64) Option {
	return func(r *Registry) error {
		return r.own.Register(byCall[uint64]{calls: calls, value: func(n uint64) float64 { return float64(n) },
			desc: prometheus.NewDesc("memcgd_host_calls_total",
				"Host calls the daemon's workers carried out, by call: observe is one step of one cgroup (its files read); set pace a CPU bandwidth write; write out, reclaim and flush the actions.",
				[]string{"call"}, nil)})
	}
}

// byCall collects a counter by call at each scrape, value converting
// each call's figure to the metric's base unit.
type byCall[V any] struct {
	calls func() map[string]V
	value func(V) float64
	desc  *prometheus.Desc
}

func (c byCall[V]) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c byCall[V]) Collect(ch chan<- prometheus.Metric) {
	for call, v := range c.calls() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, c.value(v), call)
	}
}
