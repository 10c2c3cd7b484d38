package lab

import (
	"testing"
	"time"
)

func TestLatenciesOfAThousandSamples(t *testing.T) {
	s := make(Series, 1000)
	for i := range s {
		s[i] = uint64(i+1) * uint64(time.Microsecond) // 1 µs to 1 ms
	}
	got := LatenciesOf(s)
	want := Latencies{P50: 500 * time.Microsecond, P99: 990 * time.Microsecond, P999: 999 * time.Microsecond, Max: time.Millisecond}
	if got != want {
		t.Errorf("LatenciesOf = %+v, want %+v", got, want)
	}
}

func TestVictimResultRatesAndOffCPU(t *testing.T) {
	r := VictimResult{Ops: 500, Bytes: 2 << 20, Wall: 2 * time.Second,
		Sched: SchedStat{Run: 300 * time.Millisecond, Wait: 200 * time.Millisecond}}
	if got := r.Rate(); got != 250 {
		t.Errorf("Rate = %v, want 250 a second", got)
	}
	if got := r.Throughput(); got != 1<<20 {
		t.Errorf("Throughput = %v, want 1 MiB a second", got)
	}
	if got := r.OffCPU(); got != 1500*time.Millisecond {
		t.Errorf("OffCPU = %v, want 1.5 s (2 s less 0.3 s on a CPU and 0.2 s waiting for one)", got)
	}
}
