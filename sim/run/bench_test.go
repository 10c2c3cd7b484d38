package run_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/memcgd/memcgd/sim/run"
	"github.com/memcgd/memcgd/sim/scenario"
)

// BenchmarkSeed000 runs the seed 000 scenario (10,000 cgroups; 20G in 16K
// writes through a 100M cgroup), one variant per sub-benchmark, and
// reports simulated page operations per wall second and simulated seconds
// per wall second.
func BenchmarkSeed000(b *testing.B) {
	y, err := scenario.Embedded("seed-000")
	if err != nil {
		b.Fatal(err)
	}
	sc, err := scenario.Parse(y)
	if err != nil {
		b.Fatal(err)
	}
	for _, v := range sc.Variants {
		b.Run(v.Name, func(b *testing.B) {
			var ops, events int64
			var sim float64
			cpu0 := cpuTime(b)
			for b.Loop() {
				r, err := run.Variant(sc, v, nil)
				if err != nil {
					b.Fatal(err)
				}
				ops += r.PageOps
				events += r.Events
				sim += r.End.Seconds()
			}
			s := b.Elapsed().Seconds()
			cpu := (cpuTime(b) - cpu0).Seconds()
			b.ReportMetric(float64(ops)/cpu, "pageops/cpu-s")
			b.ReportMetric(sim/cpu, "sim-s/cpu-s")
			b.ReportMetric(float64(ops)/s, "pageops/s")
			b.ReportMetric(sim/s, "sim-s/s")
			b.ReportMetric(float64(events)/s, "events/s")
		})
	}
}

// cpuTime is the process's user+system time: on a shared, loaded machine
// the wall clock says more about the neighbours than about the model.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
