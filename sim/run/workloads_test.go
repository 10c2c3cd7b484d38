package run_test

import (
	"testing"

	"github.com/memcgd/memcgd/sim/run"
	"github.com/memcgd/memcgd/sim/scenario"
)

// Every workload kind runs to completion and does what it says: the
// anonymous allocator's memory is freed at its exit, the build-like load
// reads, computes and writes its objects, and an unlimited reader reads
// every page at the disk's rate.
func TestWorkloadsRun(t *testing.T) {
	sc, err := scenario.Parse([]byte(`version: 1
name: mixed
until: 300s
machine: {memory: 2G, cgroup: v2}
disks: [{name: vda, write_bandwidth: 100M, read_bandwidth: 100M, latency: 1ms}]
cgroups: [{path: /b, limit: 256M}, {path: /a, limit: 512M}, {path: /r}]
workloads:
  - {name: build, kind: build, cgroup: /b, jobs: 40, compile: 5ms}
  - {name: anon, kind: anon, cgroup: /a, size: 200M, rate: 400M, hold: 1s}
  - {name: cat, kind: reader, cgroup: /r, size: 64M, block: 128K}
variants: [{name: stock}, {name: all, kernel: [seed-000, seed-001, seed-004]}]
report: {workload: build, focus: /b}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range sc.Variants {
		r, err := run.Variant(sc, v, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range r.Workloads {
			if w.Finish <= w.Start || w.Finish >= r.End+1 && w.Finish == 0 {
				t.Errorf("%s/%s: start %v finish %v", v.Name, w.Name, w.Start, w.Finish)
			}
		}
		b, a, c := r.Workloads[0], r.Workloads[1], r.Workloads[2]
		if b.Pages == 0 || b.Counts.Dirtied == 0 || b.CPU < 40*5e6 {
			t.Errorf("%s build: %d pages, %d dirtied, CPU %v: want reads, writes and 40 compiles", v.Name, b.Pages, b.Counts.Dirtied, b.CPU)
		}
		if a.Counts.Pgpgin < 200<<20/4096 || a.Counts.Pgpgout < 200<<20/4096 {
			t.Errorf("%s anon: pgpgin %d pgpgout %d: want 200M charged and freed", v.Name, a.Counts.Pgpgin, a.Counts.Pgpgout)
		}
		if c.Pages != 64<<20/4096 {
			t.Errorf("%s cat: read %d pages, want %d", v.Name, c.Pages, 64<<20/4096)
		}
		if bw := c.Throughput(); bw > 100<<20*1.01 {
			t.Errorf("%s cat: %.0f B/s, faster than the disk", v.Name, bw)
		}
	}
}
