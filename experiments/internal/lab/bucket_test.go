package lab

import (
	"testing"
	"time"
)

func TestBucketPacesAtItsRate(t *testing.T) {
	const chunk, rate = 10 << 10, 1 << 20 // 10 KiB chunks at 1 MiB/s: 9.8 ms each
	start := time.Now()
	b := NewBucket(rate, chunk)
	for range 11 {
		b.Take(chunk)
	}
	// The first chunk is in the bucket already; the other ten wait.
	want := time.Duration(10 * chunk * float64(time.Second) / rate)
	if got := time.Since(start); got < want-5*time.Millisecond || got > 2*want {
		t.Errorf("11 chunks took %v, want about %v", got, want)
	}
}

func TestBucketDoesNotBurstAfterAStall(t *testing.T) {
	const chunk, rate = 10 << 10, 1 << 20
	b := NewBucket(rate, chunk)
	b.Take(chunk)
	time.Sleep(100 * time.Millisecond) // a writer held up for ten chunks' time
	start := time.Now()
	b.Take(chunk) // the bucket holds one chunk: no wait
	b.Take(chunk) // then the rate again, not a catch-up burst
	want := time.Duration(chunk * float64(time.Second) / rate)
	if got := time.Since(start); got < want-2*time.Millisecond {
		t.Errorf("two chunks after a stall took %v, want at least %v", got, want)
	}
}

func TestUnpacedBucketNeverWaits(t *testing.T) {
	b := NewBucket(0, 1<<20)
	start := time.Now()
	for range 1000 {
		b.Take(1 << 20)
	}
	if got := time.Since(start); got > 10*time.Millisecond {
		t.Errorf("1000 unpaced takes took %v, want no waiting", got)
	}
}
