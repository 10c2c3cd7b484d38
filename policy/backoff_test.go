package policy

import (
	"testing"
	"time"

	"github.com/memcgd/memcgd/memcg"
)

// The backoff's specification, one attempt at a time.
func TestReclaimBackoff(t *testing.T) {
	const base = 10 * time.Millisecond
	const step = 8 * mib
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	file := func(n uint64) memcg.Stat { return memcg.Stat{File: n} }
	type op struct {
		at     time.Duration
		s      memcg.Stat
		want   bool // allow's answer
		failed bool // the outcome recorded when allowed
	}
	tests := []struct {
		name string
		ops  []op
	}{
		{"the first attempt is allowed", []op{{0, file(0), true, false}}},
		{"a failure waits base, then twice as long", []op{
			{0, file(0), true, true},
			{base - 1, file(0), false, false},
			{base, file(0), true, true},
			{base + 2*base - 1, file(0), false, false},
			{base + 2*base, file(0), true, true},
		}},
		{"a success ends the backoff", []op{
			{0, file(0), true, true},
			{base, file(0), true, false},
			{base + 1, file(0), true, true},
			{base + 1 + base - 1, file(0), false, false},
		}},
		{"page cache grown by a step ends it", []op{
			{0, file(4 * mib), true, true},
			{1, file(4*mib + step - 1), false, false},
			{2, file(4*mib + step), true, true},
			{3, file(4*mib + step), false, false}, // a new backoff, from base
			{2 + base, file(4*mib + step), true, false},
		}},
		{"anonymous growth does not end it", []op{
			{0, memcg.Stat{Anon: 10 * mib}, true, true},
			{1, memcg.Stat{Anon: 100 * mib, Usage: 100 * mib}, false, false},
		}},
	}
	for _, tt := range tests {
		var b backoff
		for i, o := range tt.ops {
			got := b.allow(at(o.at), o.s, step)
			if got != o.want {
				t.Errorf("%s: op %d at +%v: allow = %v, want %v", tt.name, i, o.at, got, o.want)
			}
			if got {
				b.record(at(o.at), o.s, o.failed, base)
			}
		}
	}
}

func TestBackoffDelay(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want time.Duration
	}{{1, 50 * time.Millisecond}, {2, 100 * time.Millisecond}, {4, 400 * time.Millisecond},
		{10, 25600 * time.Millisecond}, {11, MaxReclaimBackoff}, {1000, MaxReclaimBackoff}} {
		if got := backoffDelay(tt.n, 50*time.Millisecond); got != tt.want {
			t.Errorf("backoffDelay(%d, 50ms) = %v, want %v", tt.n, got, tt.want)
		}
	}
}
