package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/memcgd/memcgd/state"
)

func TestTimerLatenessIsAHistogramInSeconds(t *testing.T) {
	bounds := []time.Duration{time.Millisecond, 10 * time.Millisecond}
	page := scrape(t, func() []state.Status { return nil }, WithTimerLateness(bounds, func() ([]uint64, time.Duration) { return []uint64{5, 2, 1}, 80 * time.Millisecond }))
	for _, want := range []string{
		"# TYPE memcgd_timer_lateness_seconds histogram",
		`memcgd_timer_lateness_seconds_bucket{le="0.001"} 5`,
		`memcgd_timer_lateness_seconds_bucket{le="0.01"} 7`,
		`memcgd_timer_lateness_seconds_bucket{le="+Inf"} 8`,
		"memcgd_timer_lateness_seconds_sum 0.08",
		"memcgd_timer_lateness_seconds_count 8",
	} {
		if !strings.Contains(page, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
