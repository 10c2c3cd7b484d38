package policy

import "time"

// bandwidthPeriod is the smoothing window of the write bandwidth estimate:
// roundup_pow_of_two(3 * HZ) jiffies at HZ=1000, about 4.1 s
// (mm/page-writeback.c, wb_update_write_bandwidth).
const bandwidthPeriod = 4096 * time.Millisecond

// bandwidth estimates the rate at which a cgroup's dirty data is written,
// the write_bw of wb_update_write_bandwidth(): a running average over
// bandwidthPeriod, plus the kernel's second stage that follows the first
// only when it keeps moving in one direction, to filter spikes.
type bandwidth struct {
	bw  float64 // write_bandwidth, bytes/s
	avg float64 // avg_write_bandwidth, bytes/s
}

func newBandwidth() bandwidth { return bandwidth{bw: InitBW, avg: InitBW} }

// update folds in written bytes over elapsed.
func (b *bandwidth) update(written uint64, elapsed time.Duration) {
	if elapsed <= 0 {
		return
	}
	rate := float64(written) / elapsed.Seconds()
	old := b.bw
	if elapsed > bandwidthPeriod {
		b.bw, b.avg = rate, rate
		return
	}
	w := float64(elapsed) / float64(bandwidthPeriod)
	b.bw = rate*w + old*(1-w)
	// Second stage: move avg 1/8 of the way only while bw moves away
	// from it in the same direction as before.
	if b.avg > old && old >= b.bw {
		b.avg -= (b.avg - old) / 8
	}
	if b.avg < old && old <= b.bw {
		b.avg += (old - b.avg) / 8
	}
	b.avg = max(b.avg, 1)
}
