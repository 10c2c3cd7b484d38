package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/memcgd/memcgd/state"
)

func TestCallCPUAndCallsAreCountersByCall(t *testing.T) {
	cpu := map[string]time.Duration{"write out": 1500 * time.Millisecond, "observe": 250 * time.Millisecond}
	calls := map[string]uint64{"write out": 12, "observe": 3400}
	page := scrape(t, func() []state.Status { return nil },
		WithCallCPU(func() map[string]time.Duration { return cpu }), WithCalls(func() map[string]uint64 { return calls }))
	for _, want := range []string{
		"# TYPE memcgd_host_call_cpu_seconds_total counter",
		`memcgd_host_call_cpu_seconds_total{call="write out"} 1.5`,
		`memcgd_host_call_cpu_seconds_total{call="observe"} 0.25`,
		"# TYPE memcgd_host_calls_total counter",
		`memcgd_host_calls_total{call="write out"} 12`,
		`memcgd_host_calls_total{call="observe"} 3400`,
	} {
		if !strings.Contains(page, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
