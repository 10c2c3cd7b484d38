package sched

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// BenchmarkIdleCgroups builds a Core over n idle limited cgroups, lists
// and steps each once, and reports the heap the Core holds for them
// (bytes/cgroup, after a GC, the world's own watches included) and the
// time of that first pass (ns/op is one whole pass over n cgroups). The
// daemon's idle memory at the seed's 10,000 cgroups is this (the statuses
// shared with the agent, not copied) and its host's per-cgroup state.
//
//	go test ./sched -run '^$' -bench IdleCgroups -benchmem
func BenchmarkIdleCgroups(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			cgs := []any{"/", root}
			for i := range n {
				cgs = append(cgs, fmt.Sprintf("/pod%d", i), memcg.Stat{Limit: 100 * mib, Usage: 10 * mib, File: 5 * mib})
			}
			var held uint64
			for b.Loop() {
				b.StopTimer()
				w := newWorld(b, Config{}, cgs...)
				before := heapInUse()
				b.StartTimer()
				w.pass(n)
				b.StopTimer()
				held = heapInUse() - before
				runtime.KeepAlive(w.c)
				b.StartTimer()
			}
			b.ReportMetric(float64(held)/float64(n), "bytes/cgroup")
		})
	}
}

// pass carries out the Core's ops until each of the n cgroups has been
// stepped once and nothing more is due at once.
func (w *world) pass(n int) {
	stepped := map[host.Cgroup]bool{}
	for len(stepped) < n {
		rd := w.c.Ready()
		if len(rd.Ops) == 0 {
			w.t.Fatalf("the Core stopped handing out ops after %d of %d steps", len(stepped), n)
		}
		rs := make([]Result, 0, len(rd.Ops))
		for _, op := range rd.Ops {
			if op.Kind == Observe {
				stepped[op.Cgroup] = true
			}
			rs = append(rs, w.do(op))
		}
		w.c.Advance(w.now, rs...)
	}
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
