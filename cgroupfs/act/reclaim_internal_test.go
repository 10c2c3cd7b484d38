package act

import "testing"

// The steps of a memory.reclaim request: half of what is left, the last
// two of the kernel's least batches whole, within the request and the
// chunk.
func TestReclaimStep(t *testing.T) {
	const K, M = 1 << 10, 1 << 20
	tests := []struct {
		name         string
		left, budget uint64
		want         uint64
	}{
		{"half of what is left", 4 * M, 4 * M, 2 * M},
		{"half, in whole pages", 1*M + 4*K + 1, 2 * M, 516 * K},
		{"two batches or less: all of it", 256 * K, 256 * K, 256 * K},
		{"just over two batches: half", 256*K + 4*K, 1 * M, 132 * K},
		{"less than a batch: all of it, the kernel takes a batch anyway", 12 * K, 12 * K, 12 * K},
		{"at most what is still to ask", 4 * M, 1 * M, 1 * M},
		{"at most a chunk", 1 << 30, 1 << 30, ReclaimChunk},
		{"a byte short: a page", 1, 1 << 20, 4 * K},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := reclaimStep(tt.left, tt.budget); got != tt.want {
				t.Errorf("reclaimStep(%d, %d) = %d, want %d", tt.left, tt.budget, got, tt.want)
			}
		})
	}
}

// What is left of a request decided on an earlier reading of usage: a fall
// since counts toward it, a rise does not add to it.
func TestRemaining(t *testing.T) {
	const M = 1 << 20
	tests := []struct {
		name                string
		n, observed, before uint64
		want                uint64
	}{
		{"usage not known: all of it", 4 * M, 0, 100 * M, 4 * M},
		{"usage as observed: all of it", 4 * M, 100 * M, 100 * M, 4 * M},
		{"usage fell by part of it: the rest", 4 * M, 100 * M, 99 * M, 3 * M},
		{"usage fell by all of it or more: nothing", 4 * M, 100 * M, 90 * M, 0},
		{"usage rose: all of it, the growth is the next request's", 4 * M, 100 * M, 104 * M, 4 * M},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := remaining(tt.n, tt.observed, tt.before); got != tt.want {
				t.Errorf("remaining(%d, %d, %d) = %d, want %d", tt.n, tt.observed, tt.before, got, tt.want)
			}
		})
	}
}
