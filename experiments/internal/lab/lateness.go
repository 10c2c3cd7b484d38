package lab

import (
	"math"
	"slices"
	"strconv"
	"time"
)

// Lateness sums how late a daemon's loop woke for its timers over an
// arm's workload (memcgd_timer_lateness_seconds): how many wake-ups, and
// their median and 99th percentile, interpolated within the histogram's
// buckets as Prometheus's histogram_quantile does. N is −1 when unread (a
// daemon without the metric, or none).
type Lateness struct {
	N        float64
	P50, P99 time.Duration
}

// parseBuckets takes family_bucket{le="..."} from a metrics page: the
// cumulative count at each upper bound, +Inf included.
func parseBuckets(text, family string) map[float64]float64 {
	out := map[float64]float64{}
	for le, v := range samples(text, family+`_bucket{le="`) {
		if b, err := strconv.ParseFloat(le, 64); err == nil { // "+Inf" parses to +Inf
			out[b] = v
		}
	}
	return out
}

// lateness is the histogram's rise from `from` to `to`, summed.
func lateness(from, to map[float64]float64) Lateness {
	if len(from) == 0 || len(to) == 0 {
		return Lateness{N: -1}
	}
	bounds := make([]float64, 0, len(to))
	for b := range to {
		bounds = append(bounds, b)
	}
	slices.Sort(bounds)
	counts := make([]float64, len(bounds))
	for i, b := range bounds {
		counts[i] = to[b] - from[b]
	}
	n := counts[len(counts)-1]
	return Lateness{N: n, P50: quantile(0.5, bounds, counts), P99: quantile(0.99, bounds, counts)}
}

// quantile is the q-quantile of a histogram of cumulative counts at
// sorted upper bounds, the last +Inf: linear within the bucket it falls
// in, the lowest bucket from 0, and the highest finite bound for one past
// every bound (histogram_quantile's rules).
func quantile(q float64, bounds, counts []float64) time.Duration {
	n := counts[len(counts)-1]
	if n <= 0 {
		return 0
	}
	rank := q * n
	for i, c := range counts {
		if c < rank {
			continue
		}
		if math.IsInf(bounds[i], 1) {
			return seconds(bounds[max(i-1, 0)])
		}
		lo, below := 0.0, 0.0
		if i > 0 {
			lo, below = bounds[i-1], counts[i-1]
		}
		if c == below {
			return seconds(bounds[i])
		}
		return seconds(lo + (bounds[i]-lo)*(rank-below)/(c-below))
	}
	return seconds(bounds[len(bounds)-1])
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
