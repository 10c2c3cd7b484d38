package lab

import "time"

// Bucket is a token bucket of bytes that paces a writer: Take waits until
// the bytes' tokens are in. It holds at most Capacity, so a writer held up
// (by reclaim, by a throttle) does not burst afterwards to catch up: it
// writes at most Rate from then on, as a paced producer would. A zero Rate
// never waits.
type Bucket struct {
	rate, capacity, tokens float64
	last                   time.Time
}

// NewBucket returns a full bucket of capacity bytes refilled at rate bytes
// per second; rate 0 never waits.
func NewBucket(rate, capacity uint64) *Bucket {
	return &Bucket{rate: float64(rate), capacity: float64(capacity), tokens: float64(capacity), last: time.Now()}
}

// Take waits until n bytes' tokens are in the bucket and takes them.
func (b *Bucket) Take(n uint64) {
	if b.rate == 0 {
		return
	}
	need := float64(n)
	b.refill()
	if b.tokens < need {
		time.Sleep(time.Duration((need - b.tokens) / b.rate * float64(time.Second)))
		b.refill()
	}
	b.tokens -= need
}

func (b *Bucket) refill() {
	now := time.Now()
	b.tokens = min(b.capacity, b.tokens+b.rate*now.Sub(b.last).Seconds())
	b.last = now
}
