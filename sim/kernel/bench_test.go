package kernel

import (
	"syscall"
	"testing"
	"time"
)

// seqWriter is the simplest workload: write pages sequentially.
type seqWriter struct {
	ino, pages, off, block int64
}

func (w *seqWriter) Step(k *Kernel, t *Task) bool {
	w.off += k.Write(t, int32(w.ino), w.off, w.pages-w.off, w.block, 1)
	return w.off >= w.pages
}

// BenchmarkCoreWriter is the model's core loop: a writer pushing 4G in 16K
// writes through a 100M cgroup v1 (charge, limit reclaim, flusher, disk).
func BenchmarkCoreWriter(b *testing.B) {
	var ops int64
	var sim float64
	cpu0 := cpuTime(b)
	for b.Loop() {
		k := testKernel(b, 1, Options{})
		k.cfg.Disks[0].WriteBandwidth = 800 << 20
		k.disks[0].cfg.WriteBandwidth = 800 << 20
		m := k.NewMemcg(0, "/x1", 100<<20, -1)
		k.NewTask("w", m, &seqWriter{ino: int64(k.NewInode(0)), pages: 1 << 20, block: 4}, 0)
		sim += k.Run(1000 * Second).Seconds()
		ops += k.PageOps()
	}
	s := b.Elapsed().Seconds()
	cpu := (cpuTime(b) - cpu0).Seconds()
	b.ReportMetric(float64(ops)/cpu, "pageops/cpu-s")
	b.ReportMetric(float64(ops)/s, "pageops/s")
	b.ReportMetric(sim/s, "sim-s/s")
}

// BenchmarkCoreWriterCPUQuota is BenchmarkCoreWriter with the writer in a
// cpu group allowed 50 ms per 100 ms: the CFS bandwidth path (charging
// each step, throttling, the period timer, unthrottling) on top of the
// core loop.
func BenchmarkCoreWriterCPUQuota(b *testing.B) {
	var ops int64
	var sim float64
	cpu0 := cpuTime(b)
	for b.Loop() {
		k := testKernel(b, 1, Options{})
		k.cfg.Disks[0].WriteBandwidth = 800 << 20
		k.disks[0].cfg.WriteBandwidth = 800 << 20
		k.cfg.WriteCostPerPage = 2600
		m := k.NewMemcg(0, "/x1", 100<<20, -1)
		g := k.NewCPUGroup(0, "/x1")
		if err := k.SetCPUMax(g, 50*Millisecond, 100*Millisecond, 0); err != nil {
			b.Fatal(err)
		}
		t := k.NewTask("w", m, &seqWriter{ino: int64(k.NewInode(0)), pages: 1 << 20, block: 4}, 0)
		k.MoveTask(t, g)
		sim += k.Run(1000 * Second).Seconds()
		ops += k.PageOps()
	}
	s := b.Elapsed().Seconds()
	cpu := (cpuTime(b) - cpu0).Seconds()
	b.ReportMetric(float64(ops)/cpu, "pageops/cpu-s")
	b.ReportMetric(float64(ops)/s, "pageops/s")
	b.ReportMetric(sim/s, "sim-s/s")
}

// BenchmarkEventHeap pushes and pops with a steady population of 1024.
func BenchmarkEventHeap(b *testing.B) {
	var h eventHeap
	for i := 0; i < 1024; i++ {
		h.push(Time(i*7919%1024), evTask, int32(i), 0)
	}
	cpu0 := cpuTime(b)
	for b.Loop() {
		e := h.pop()
		h.push(e.at+Time(e.seq%1024), evTask, e.id, 0)
	}
	b.ReportMetric(float64(b.N)/(cpuTime(b)-cpu0).Seconds(), "events/cpu-s")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
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
