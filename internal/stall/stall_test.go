package stall

import (
	"reflect"
	"runtime"
	"testing"
	"time"
)

func TestOverlap(t *testing.T) {
	ms := time.Millisecond
	iv := func(from, to int) Interval { return Interval{time.Duration(from) * ms, time.Duration(to) * ms} }
	for _, tt := range []struct {
		name  string
		lists [][]Interval
		want  []Interval
	}{
		{"one CPU: its late wake-ups are the stalls", [][]Interval{{iv(0, 6), iv(10, 20)}}, []Interval{iv(0, 6), iv(10, 20)}},
		{"two CPUs late at once: the common part", [][]Interval{{iv(0, 10)}, {iv(4, 14)}}, []Interval{iv(4, 10)}},
		{"late one after the other: no stall", [][]Interval{{iv(0, 6)}, {iv(6, 12)}}, nil},
		{"one CPU never late: no stall", [][]Interval{{iv(0, 10), iv(100, 120)}, nil}, nil},
		{"one long lateness across two of the other's", [][]Interval{{iv(0, 100)}, {iv(10, 20), iv(50, 60), iv(110, 120)}}, []Interval{iv(10, 20), iv(50, 60)}},
		{"three CPUs", [][]Interval{{iv(0, 30)}, {iv(5, 25)}, {iv(10, 40)}}, []Interval{iv(10, 25)}},
		{"no CPUs", nil, nil},
	} {
		if got := Overlap(tt.lists); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: Overlap = %v; want %v", tt.name, got, tt.want)
		}
	}
}

func TestTouches(t *testing.T) {
	ms := time.Millisecond
	stalls := []Interval{{10 * ms, 20 * ms}, {50 * ms, 60 * ms}}
	for _, tt := range []struct {
		name string
		iv   Interval
		want bool
	}{
		{"before every stall", Interval{0, 9 * ms}, false},
		{"across a stall's start", Interval{9 * ms, 11 * ms}, true},
		{"within a stall", Interval{12 * ms, 13 * ms}, true},
		{"begun just after a stall's end", Interval{22 * ms, 23 * ms}, true},
		{"begun well after", Interval{30 * ms, 31 * ms}, false},
		{"no stalls", Interval{0, time.Second}, false},
	} {
		s := stalls
		if tt.name == "no stalls" {
			s = nil
		}
		if got := Touches(s, tt.iv, 5*ms); got != tt.want {
			t.Errorf("%s: Touches(%v) = %v; want %v", tt.name, tt.iv, got, tt.want)
		}
	}
}

func TestSum(t *testing.T) {
	ms := time.Millisecond
	got := Sum([]Interval{{0, 6 * ms}, {10 * ms, 30 * ms}})
	if want := (Stalls{Count: 2, Total: 26 * ms, Max: 20 * ms}); got != want {
		t.Errorf("Sum = %+v; want %+v", got, want)
	}
}

// TestProbeRunsAThreadPerCPU starts and stops the probe on this
// machine: it must run, leave GOMAXPROCS as it was, and count no stall
// longer than the time it ran.
func TestProbeRunsAThreadPerCPU(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	p, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got <= procs {
		t.Errorf("GOMAXPROCS while probing = %d; want more than %d, a P for each probe thread", got, procs)
	}
	start := time.Now()
	time.Sleep(50 * time.Millisecond)
	s, err := p.Stop()
	ran := time.Since(start)
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if got := runtime.GOMAXPROCS(0); got != procs {
		t.Errorf("GOMAXPROCS after Stop = %d; want %d as before", got, procs)
	}
	if s.Total > ran || s.Max > s.Total || (s.Count == 0) != (s.Total == 0) {
		t.Errorf("Stop = %+v after %v: stalls must fit in the time probed", s, ran)
	}
	// The stalls are on the machine's monotonic clock, within the probe.
	end := Now()
	for _, iv := range p.Intervals() {
		if iv.From < end-ran-time.Second || iv.To > end || iv.From >= iv.To {
			t.Errorf("stall %v outside the probe's time, which ended at %v", iv, end)
		}
	}
	if len(p.Intervals()) != s.Count {
		t.Errorf("%d stall intervals, %d stalls counted", len(p.Intervals()), s.Count)
	}
}
