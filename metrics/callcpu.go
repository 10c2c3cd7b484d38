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
		return r.own.Register(callCPUCollector{calls: calls, desc: prometheus.NewDesc("memcgd_host_call_cpu_seconds_total",
			"CPU time the daemon's workers spent carrying out host calls, by call: write out, flush and reclaim are mostly the kernel's work (submitting writeback, reclaiming); observe is reading the cgroups' files.",
			[]string{"call"}, nil)})
	}
}

// callCPUCollector collects WithCallCPU's counter at each scrape.
type callCPUCollector struct {
	calls func() map[string]time.Duration
	desc  *prometheus.Desc
}

func (c callCPUCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c callCPUCollector) Collect(ch chan<- prometheus.Metric) {
	for call, d := range c.calls() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, d.Seconds(), call)
	}
}
