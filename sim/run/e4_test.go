package run_test

import (
	"bytes"
	"testing"

	"github.com/memcgd/memcgd/sim/kernel"
	"github.com/memcgd/memcgd/sim/report"
	"github.com/memcgd/memcgd/sim/run"
)

// E4, the noisy neighbour: freezing the noisy cgroup (memcgd with
// --pace=off) stops the sleeper that shares it, while pacing only the
// writer's thread with CFS bandwidth (memcgd, and the static cpu-max)
// leaves the sleeper on time; memcgd's pace holds the writer's
// dirty+writeback near its 64M limit, with no freeze, at about the
// disk's rate, and the static quota holds it to its share of the CPU; the stock kernel's global dirty
// limit throttles a modest buffered writer in another cgroup, and seed
// 004's per-cgroup limit does not; a WAL's commits wait behind the
// noisy writer's full disk queue twice (data, then the journal). The
// expected figures come from the scenario's parameters, not from a run.
func TestE4FreezingStopsTheSleeperWhereCPUPacingDoesNot(t *testing.T) {
	sc, rs, _ := runEmbedded(t, "e4")
	sleeper := func(v string) run.WorkloadResult { return wl(rs[v], "sleeper") }
	if late := sleeper("memcgd-freeze").Latencies.Percentile(99); late < 10*kernel.Millisecond {
		t.Errorf("memcgd-freeze: the sleeper's p99 wake-up is %v late, want the freezes to show (over 10 ms)", late)
	}
	if fr := sleeper("memcgd-freeze").Stopped[kernel.StopFrozen]; fr < kernel.Second {
		t.Errorf("memcgd-freeze: the sleeper was frozen %v, want over a second of the writer's freezes", fr)
	}
	m := rs["memcgd"]
	if m.Daemon.Freezes != 0 || m.Daemon.Paces == 0 {
		t.Errorf("memcgd: %d freezes, %d paces: want the writer paced, never frozen", m.Daemon.Freezes, m.Daemon.Paces)
	}
	if limit := int64(64 << 20); m.P99Dirty*kernel.PageSize > limit*5/4 {
		t.Errorf("memcgd: p99 dirty+writeback %d MiB, want within 1.25 × the 64M limit", m.P99Dirty*kernel.PageSize>>20)
	}
	if w, disk := wl(m, "writer").Throughput(), float64(sc.Disks[0].WriteBandwidth); w < 0.9*disk {
		t.Errorf("memcgd: the paced writer at %.0f B/s, want at least 0.9 × the disk's %.0f", w, disk)
	}
	for _, v := range []string{"stock", "cpu-max", "memcgd"} {
		if late := sleeper(v).Latencies.Percentile(100); late != 0 {
			t.Errorf("%s: the sleeper woke up to %v late, want on time", v, late)
		}
		if n, want := len(sleeper(v).Latencies), int(sc.Workloads[1].Duration/sc.Workloads[1].Interval); n != want {
			t.Errorf("%s: %d wake-ups, want %d", v, n, want)
		}
	}
	w := wl(rs["cpu-max"], "writer")
	// 25 ms of CPU per 100 ms at 2.6 us per page.
	if want := 0.25 / 2.6e-6 * kernel.PageSize; w.Throughput() < 0.95*want || w.Throughput() > 1.05*want {
		t.Errorf("cpu-max: the writer dirtied %.0f B/s, want its quota's %.0f", w.Throughput(), want)
	}
	if st := rs["cpu-max"].CPUGroups[0]; w.Stopped[kernel.StopCPUThrottled] < kernel.Second || st.NrThrottled == 0 {
		t.Errorf("cpu-max: the writer was CPU-throttled %v, nr_throttled %d", w.Stopped[kernel.StopCPUThrottled], st.NrThrottled)
	}
	app := func(v string) run.WorkloadResult { return wl(rs[v], "app") }
	rate := float64(sc.Workloads[3].Rate)
	if a := app("stock"); a.Stopped[kernel.StopDirtyPause] < kernel.Second || a.Throughput() > 0.9*rate {
		t.Errorf("stock: the app writer paused %v at %.0f B/s, want the global dirty limit to hold it under its %.0f",
			a.Stopped[kernel.StopDirtyPause], a.Throughput(), rate)
	}
	if a := app("dirty-limit"); a.Stopped[kernel.StopDirtyPause] != 0 || a.Throughput() < 0.99*rate {
		t.Errorf("dirty-limit: the app writer paused %v at %.0f B/s, want none at its %.0f", a.Stopped[kernel.StopDirtyPause], a.Throughput(), rate)
	}
	d := sc.Disks[0]
	queue := kernel.Time(float64(d.NrRequests) * float64(d.MaxRequest) / float64(d.WriteBandwidth) * float64(kernel.Second))
	if p99 := wl(rs["stock"], "wal").Latencies.Percentile(99); p99 < 2*queue*9/10 {
		t.Errorf("stock: WAL commit p99 %v, want two drains of the %v queue", p99, queue)
	}
}

// E4's report and CSV are the same from run to run.
func TestE4Deterministic(t *testing.T) {
	render := func() []byte {
		sc, _, rs := runEmbedded(t, "e4")
		var b bytes.Buffer
		if err := report.Write(&b, sc, rs); err != nil {
			t.Fatal(err)
		}
		if err := report.CSV(&b, rs); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	if a, b := render(), render(); !bytes.Equal(a, b) {
		t.Fatalf("two runs differ (%d and %d bytes)", len(a), len(b))
	}
}
