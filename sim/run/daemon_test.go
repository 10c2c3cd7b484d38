package run_test

import (
	"bytes"
	"testing"

	"github.com/memcgd/memcgd/sim/report"
	"github.com/memcgd/memcgd/sim/run"
	"github.com/memcgd/memcgd/sim/scenario"
)

func runEmbedded(t *testing.T, name string) (*scenario.Scenario, map[string]*run.Result, []*run.Result) {
	t.Helper()
	b, err := scenario.Embedded(name)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*run.Result{}
	var rs []*run.Result
	for _, v := range sc.Variants {
		r, err := run.Variant(sc, v, nil)
		if err != nil {
			t.Fatal(err)
		}
		byName[v.Name] = r
		rs = append(rs, r)
	}
	return sc, byName, rs
}

// Issue 7's targets, on the simulated kernel: the closed loop, carried
// out on the policy.Decision contract with a 1 ms event latency, holds an
// unpaced writer's dirty+writeback to p99 ≤ 1.25 × dirty_bytes at ≥ 95 %
// of the disk's rate, tracker or not; the old open loop stepped every
// 50 ms does not hold it (docs/results.md measured p99 6 × on the host).
// The thresholds come from the issue, not from the model's output.
func TestClosedLoopHoldsDirtyBytesWhereTheOpenLoopDoesNot(t *testing.T) {
	sc, rs, _ := runEmbedded(t, "daemon-reaction")
	disk := float64(sc.Disks[0].WriteBandwidth)
	ratio := func(r *run.Result) float64 { return float64(r.P99Dirty*4096) / float64(r.DirtyBytes) }
	for _, name := range []string{"closed-trk-1ms", "closed-poll"} {
		r := rs[name]
		if r.DirtyBytes != 16<<20 {
			t.Fatalf("%s: dirty_bytes %d, want the scenario's 16M", name, r.DirtyBytes)
		}
		tp := wl(r, "writer").Throughput()
		t.Logf("%s: p99 %.2f × dirty_bytes, %.1f MB/s (disk %.1f), %d steps, %d freezes, %.2f s frozen",
			name, ratio(r), tp/1e6, disk/1e6, r.Daemon.Steps, r.Daemon.Freezes, r.Daemon.Frozen.Seconds())
		if ratio(r) > 1.25 {
			t.Errorf("%s: p99 dirty+writeback %.2f × dirty_bytes, want ≤ 1.25", name, ratio(r))
		}
		if tp < 0.95*disk {
			t.Errorf("%s: writer at %.1f MB/s, want ≥ 95 %% of the disk's %.1f", name, tp/1e6, disk/1e6)
		}
		if r.Daemon.Freezes == 0 || r.Daemon.Violations != 0 || r.Daemon.Errors != 0 {
			t.Errorf("%s: %d freezes, %d contract violations, %d errors", name, r.Daemon.Freezes, r.Daemon.Violations, r.Daemon.Errors)
		}
	}
	if r := rs["closed-trk-1ms"]; r.Daemon.Wakeups == 0 {
		t.Errorf("closed-trk-1ms: the tracker never woke the driver")
	}
	open := rs["open-50ms"]
	t.Logf("open-50ms: p99 %.2f × dirty_bytes", ratio(open))
	if ratio(open) <= 1.25 {
		t.Errorf("open-50ms: p99 %.2f × dirty_bytes: the old open loop met the target, the scenario cannot tell the loops apart", ratio(open))
	}
	if s := rs["stock"]; s.P99Dirty*4096 < 4*16<<20 {
		t.Errorf("stock v1: p99 %d pages: want the cgroup to fill with dirty pages (no per-cgroup limit)", s.P99Dirty)
	}
}

// A slower reaction costs more: with 50 ms of event latency the driver
// sees the writer's start later (the cgroup fills before the first
// freeze) than with 1 ms.
func TestEventLatencyCostsTheStart(t *testing.T) {
	_, rs, _ := runEmbedded(t, "daemon-reaction")
	fast, slow := rs["closed-trk-1ms"], rs["closed-trk-50ms"]
	if slow.WarmupPeakDirty <= 2*fast.WarmupPeakDirty {
		t.Errorf("peak dirty+writeback in the warm-up: %d pages at 50 ms, %d at 1 ms: want the slow driver well above", slow.WarmupPeakDirty, fast.WarmupPeakDirty)
	}
	if slow.Daemon.Steps >= fast.Daemon.Steps {
		t.Errorf("steps: %d at 50 ms, %d at 1 ms", slow.Daemon.Steps, fast.Daemon.Steps)
	}
}

// The same scenario gives the same bytes, daemon variants included.
func TestDaemonReactionDeterministic(t *testing.T) {
	render := func() []byte {
		sc, _, rs := runEmbedded(t, "daemon-reaction")
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

// What the closed loop adds to the contract's timing: at 1 ms the open
// loop on the same event-driven timing also holds the rule, but at 50 ms
// of event latency only the closed loop, whose deadlines the driver keeps
// by its own timers, still does.
func TestClosedLoopHoldsTheRuleAtFiftyMillisecondsWhereTheOpenLoopDoesNot(t *testing.T) {
	b, err := scenario.Embedded("daemon-reaction")
	if err != nil {
		t.Fatal(err)
	}
	a, err := scenario.ParseAssignment("variants[5].memcgd.latency=50ms")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Parse(b, a)
	if err != nil {
		t.Fatal(err)
	}
	ratio := map[string]float64{}
	for _, v := range sc.Variants {
		if v.Name != "closed-trk-50ms" && v.Name != "open-trk-1ms" {
			continue
		}
		r, err := run.Variant(sc, v, nil)
		if err != nil {
			t.Fatal(err)
		}
		ratio[v.Name] = float64(r.P99Dirty*4096) / float64(r.DirtyBytes)
	}
	t.Logf("50 ms event latency: closed loop p99 %.2f × dirty_bytes, open loop %.2f ×", ratio["closed-trk-50ms"], ratio["open-trk-1ms"])
	if ratio["closed-trk-50ms"] > 1.25 {
		t.Errorf("closed loop at 50 ms: p99 %.2f × dirty_bytes, want ≤ 1.25", ratio["closed-trk-50ms"])
	}
	if ratio["open-trk-1ms"] <= 1.25 {
		t.Errorf("open loop at 50 ms: p99 %.2f × dirty_bytes: want it above 1.25, or the closed loop adds nothing here", ratio["open-trk-1ms"])
	}
}

// The real agent on the simulated kernel does what its model does: with
// the tracker at 1 ms it holds the unpaced writer's dirty+writeback to
// p99 ≤ 1.25 × dirty_bytes (issue 7's target) at ≥ 95 % of the disk's
// rate, with held freezes and no failed action, and never lets the
// cgroup's charges exceed its limit, as closed-trk-1ms.
func TestRealAgentHoldsDirtyBytesAsItsModel(t *testing.T) {
	sc, rs, _ := runEmbedded(t, "daemon-agent")
	disk := float64(sc.Disks[0].WriteBandwidth)
	ratio := func(r *run.Result) float64 { return float64(r.P99Dirty*4096) / float64(r.DirtyBytes) }
	for _, name := range []string{"closed-trk-1ms", "agent-trk-1ms"} {
		r := rs[name]
		tp := wl(r, "writer").Throughput()
		t.Logf("%s: p99 %.2f × dirty_bytes, %.1f MB/s (disk %.1f), %d steps, %d freezes (%d by RunFor), %d wake-ups, %.2f s frozen",
			name, ratio(r), tp/1e6, disk/1e6, r.Daemon.Steps, r.Daemon.Freezes, r.Daemon.DriverFreezes, r.Daemon.Wakeups, r.Daemon.Frozen.Seconds())
		if r.DirtyBytes != 16<<20 {
			t.Fatalf("%s: dirty_bytes %d, want the scenario's 16M", name, r.DirtyBytes)
		}
		if ratio(r) > 1.25 {
			t.Errorf("%s: p99 dirty+writeback %.2f × dirty_bytes, want ≤ 1.25", name, ratio(r))
		}
		if tp < 0.95*disk {
			t.Errorf("%s: writer at %.1f MB/s, want ≥ 95 %% of the disk's %.1f", name, tp/1e6, disk/1e6)
		}
		if r.Daemon.Freezes == 0 || r.Daemon.Wakeups == 0 || r.Daemon.Errors != 0 {
			t.Errorf("%s: %d freezes, %d wake-ups, %d errors", name, r.Daemon.Freezes, r.Daemon.Wakeups, r.Daemon.Errors)
		}
		if f := r.FocusCounts.Failcnt; f != 0 {
			t.Errorf("%s: %d charges over the limit, want 0", name, f)
		}
	}
	if s := rs["stock"]; s.P99Dirty*4096 < 4*16<<20 {
		t.Errorf("stock v1: p99 %d pages: want the cgroup to fill with dirty pages", s.P99Dirty)
	}
}
