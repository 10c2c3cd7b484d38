package lab

import (
	"strconv"
	"testing"
	"time"
)

func TestLatenessFromTheDaemonsHistogram(t *testing.T) {
	page := func(b1, b10, inf int) string {
		return "# TYPE memcgd_timer_lateness_seconds histogram\n" +
			`memcgd_timer_lateness_seconds_bucket{le="0.001"} ` + strconv.Itoa(b1) + "\n" +
			`memcgd_timer_lateness_seconds_bucket{le="0.01"} ` + strconv.Itoa(b10) + "\n" +
			`memcgd_timer_lateness_seconds_bucket{le="+Inf"} ` + strconv.Itoa(inf) + "\n" +
			"memcgd_timer_lateness_seconds_sum 0.5\nmemcgd_timer_lateness_seconds_count " + strconv.Itoa(inf) + "\n"
	}
	for _, tt := range []struct {
		name     string
		from, to string
		want     Lateness
	}{
		{"all on time: within the first bucket, from 0", page(10, 10, 10), page(110, 110, 110),
			Lateness{N: 100, P50: 500 * time.Microsecond, P99: 990 * time.Microsecond}},
		{"a tail in the second bucket", page(0, 0, 0), page(90, 100, 100),
			Lateness{N: 100, P50: 555555 * time.Nanosecond, P99: 9100 * time.Microsecond}},
		{"past every bound: the highest bound", page(0, 0, 0), page(50, 50, 100),
			Lateness{N: 100, P50: time.Millisecond, P99: 10 * time.Millisecond}},
		{"no wake-up in the interval", page(5, 5, 5), page(5, 5, 5), Lateness{N: 0}},
		{"unread", "", page(5, 5, 5), Lateness{N: -1}},
	} {
		got := lateness(parseBuckets(tt.from, "memcgd_timer_lateness_seconds"), parseBuckets(tt.to, "memcgd_timer_lateness_seconds"))
		if got.N != tt.want.N || absDiff(got.P50, tt.want.P50) > time.Microsecond || absDiff(got.P99, tt.want.P99) > time.Microsecond {
			t.Errorf("%s: lateness = %+v; want %+v", tt.name, got, tt.want)
		}
	}
}

func absDiff(a, b time.Duration) time.Duration {
	if a > b {
		return a - b
	}
	return b - a
}
