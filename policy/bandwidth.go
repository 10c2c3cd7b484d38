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
	// drainMeasured says a drain has been measured: until then the
	// estimate is INIT_BW or counters folded slowly into it, a guess.
	drainMeasured bool
	// busyWritten and busyFor sum the busy samples (busy) taken before
	// a drain was measured.
	busyWritten uint64
	busyFor     time.Duration
}

// firstBusySpan is how much time of busy samples (busy) stands for the
// first drain: a few of the device's completion bursts.
const firstBusySpan = 50 * time.Millisecond

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

// drained folds in a measured drain: bytes written while the cgroup was
// frozen, over the time it was frozen. With the writer stopped the device
// was writing the cgroup's pages all along, so this is the cleanest
// sample there is. The first one replaces the estimate outright: INIT_BW
// is a guess (a 200 MB/s disk would be paced at half speed for seconds
// while a 4 s average forgot it); later ones are averaged as the kernel
// averages. A drain of nothing says nothing (writeback stalled, or the
// counters did not move) and is not learnt from.
func (b *bandwidth) drained(written uint64, frozen time.Duration) {
	if written == 0 || frozen <= 0 {
		return
	}
	if !b.drainMeasured {
		b.drainMeasured = true
		rate := float64(written) / frozen.Seconds()
		b.bw, b.avg = rate, rate
		return
	}
	b.update(written, frozen)
}

// busy folds in bytes written over elapsed while writeback was in flight
// throughout: the device had work all along, so the rate is the device's,
// whatever held the dirtier (a pace below the device's rate would
// otherwise be learnt as the bandwidth, and keep itself there). Until a
// drain is measured, firstBusySpan of them stand for the first drain, so
// the estimate leaves INIT_BW at once; after, they are averaged as the
// kernel averages.
func (b *bandwidth) busy(written uint64, elapsed time.Duration) {
	if b.drainMeasured {
		b.update(written, elapsed)
		return
	}
	b.busyWritten += written
	b.busyFor += elapsed
	if b.busyFor >= firstBusySpan {
		b.drained(b.busyWritten, b.busyFor)
		b.busyWritten, b.busyFor = 0, 0
	}
}
