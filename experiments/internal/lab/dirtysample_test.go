package lab

import (
	"testing"
	"time"
)

func TestAboveFindsExcursionsAndTheirLengths(t *testing.T) {
	ms := time.Millisecond
	s := DirtySamples{
		At:    []time.Duration{0, 1 * ms, 2 * ms, 3 * ms, 4 * ms, 5 * ms, 6 * ms, 7 * ms, 8 * ms, 9 * ms, 10 * ms},
		Bytes: Series{1, 9, 9, 9, 1, 1, 9, 1, 1, 9, 9},
	}
	got := s.Above(5)
	// Three stretches: 1–4 ms (3 ms), 6–7 ms (1 ms), and 9 ms to the end
	// (1 ms, still above); 5 of the 10 ms above (the last sample stands
	// for no time).
	want := Excursions{N: 3, Longest: 3 * ms, Above: 5 * ms, Share: 50}
	if got != want {
		t.Errorf("Above(5) = %+v, want %+v", got, want)
	}
	if got := s.Above(10); got != (Excursions{}) {
		t.Errorf("Above(10) = %+v, want none", got)
	}
	if got := (DirtySamples{At: []time.Duration{0}, Bytes: Series{9}}).Above(5); got != (Excursions{}) {
		t.Errorf("one sample: Above(5) = %+v, want none (no time sampled)", got)
	}
}

func TestFreezeDelaysTimeEachOvershootToTheNextFreeze(t *testing.T) {
	ms := time.Millisecond
	s := DirtySamples{
		At:     []time.Duration{0, 1 * ms, 2 * ms, 3 * ms, 4 * ms, 5 * ms, 6 * ms, 7 * ms, 8 * ms, 9 * ms},
		Bytes:  Series{1, 9, 9, 9, 9, 1, 9, 9, 1, 9},
		Frozen: []bool{false, false, false, true, true, false, true, false, false, false},
	}
	// Over at 1 ms, frozen at 3 ms: 2 ms. Frozen samples above the level
	// start nothing. Over at 6 ms while frozen: nothing; over at 7 ms,
	// running, then below at 8 ms and over again at 9 ms: the sampling
	// ends before a freeze, so not counted.
	got := s.FreezeDelays(5)
	if len(got) != 1 || got[0] != uint64(2*ms) {
		t.Errorf("FreezeDelays(5) = %v, want [2ms]", got)
	}
}
