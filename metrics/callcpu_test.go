package metrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/memcgd/memcgd/state"
)

func TestCallCPUAndCallsAreCountersByCall(t *testing.T) {
	cpu := map[string]time.Duration{"write out": 1500 * time.Millisecond, "observe": 250 * time.Millisecond}
	calls := map[string]uint64{"write out": 12, "observe": 3400}
	reg, err := NewRegistry(func() []state.Status { return nil },
		WithCallCPU(func() map[string]time.Duration { return cpu }), WithCalls(func() map[string]uint64 { return calls }))
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	Handler(reg, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, want := range []string{
		"# TYPE memcgd_host_call_cpu_seconds_total counter",
		`memcgd_host_call_cpu_seconds_total{call="write out"} 1.5`,
		`memcgd_host_call_cpu_seconds_total{call="observe"} 0.25`,
		"# TYPE memcgd_host_calls_total counter",
		`memcgd_host_calls_total{call="write out"} 12`,
		`memcgd_host_calls_total{call="observe"} 3400`,
	} {
		if !strings.Contains(rec.Body.String(), want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
