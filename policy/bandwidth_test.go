package policy

import (
	"testing"
	"time"
)

// Samples taken with writeback in flight throughout are the device's
// rate: the first 50 ms of them replace INIT_BW, whatever paced the
// dirtier; after that they are averaged as the kernel averages.
func TestBusySamplesReplaceTheInitialGuess(t *testing.T) {
	for _, tt := range []struct {
		name    string
		samples []time.Duration // each writes 1.5 GB/s worth
		want    float64         // avg after them
	}{
		{"one 5 ms sample: still the guess", []time.Duration{5 * ms}, InitBW},
		{"45 ms of them: still the guess", []time.Duration{20 * ms, 20 * ms, 5 * ms}, InitBW},
		{"50 ms of them: the device's rate", []time.Duration{20 * ms, 20 * ms, 10 * ms}, 1.5e9},
	} {
		b := newBandwidth()
		for _, d := range tt.samples {
			b.busy(uint64(1.5e9*d.Seconds()), d)
		}
		if got := b.avg; got < 0.999*tt.want || got > 1.001*tt.want {
			t.Errorf("%s: bandwidth %.0f, want %.0f", tt.name, got, tt.want)
		}
	}
	b := newBandwidth()
	b.busy(75e6, 50*ms)
	b.busy(0, 5*ms) // a stalled device, measured: the estimate falls
	if b.bw >= 1.5e9 {
		t.Errorf("after a busy interval with nothing written: bw %.0f, want below 1.5e9", b.bw)
	}
}
