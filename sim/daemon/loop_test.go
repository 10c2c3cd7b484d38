package daemon

import (
	"slices"
	"testing"
	"time"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/policy"
	"github.com/memcgd/memcgd/sim/kernel"
	"github.com/memcgd/memcgd/sim/workload"
)

// loopRun drives an unpaced writer of 1G in a v1 cgroup limited to 100M
// (dirty_bytes 16M) with the Loop, and samples dirty+writeback every ms.
type loopRun struct {
	l        *Loop
	w        *workload.Writer
	k        *kernel.Kernel
	m        int32
	p99, max int64 // pages, after the first 500 ms
	frozenAt bool  // the cgroup was frozen when the run ended
}

func runLoop(t *testing.T, tracker bool, reaction time.Duration) loopRun {
	t.Helper()
	// A writer of about 1.5 GB/s (2.6 µs of CPU per page), as in
	// policy's own closed-loop model, on a 200 MiB/s disk.
	k, err := kernel.New(kernel.Config{CgroupVersion: 1, MemoryPages: 4 << 18,
		VMDirty:             memcg.Knobs{DirtyRatio: 20, DirtyBackgroundRatio: 10},
		DirtyExpireInterval: 30 * kernel.Second, DirtyWritebackInterval: 5 * kernel.Second,
		WriteCostPerPage: 2600, ScanCostPerPage: 100,
		Disks: []kernel.DiskConfig{{Name: "vda", WriteBandwidth: 200 << 20, ReadBandwidth: 200 << 20, NrRequests: 64, MaxRequestPages: 256}}},
		kernel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := k.NewMemcg(0, "/exp", 100<<20, -1)
	kn := memcg.DefaultKnobs()
	if err := kn.Apply(map[string]string{"dirty_bytes": "16M", "dirty_background_bytes": "8M"}); err != nil {
		t.Fatal(err)
	}
	k.SetKnobs(m, kn)
	w := &workload.Writer{Ino: k.NewInode(0), Pages: 1024 << 8, Block: 256, Accesses: 1}
	k.NewTask("w", m, w, 0)
	l := &Loop{H: NewHost(k), ActiveInterval: 50 * time.Millisecond, Reaction: reaction, Tracker: tracker,
		Freezer: policy.FreezerHeld, Managed: []Managed{{Chain: []host.Cgroup{"/exp"}, Knobs: []memcg.Knobs{kn}}}}
	l.Start(k)
	var samples []int64
	k.Every(0, kernel.Millisecond, func(k *kernel.Kernel) {
		if k.Now() >= 500*kernel.Millisecond {
			g := k.Gauge(m)
			samples = append(samples, g.Dirty+g.Writeback)
		}
	})
	k.Run(60 * kernel.Second)
	r := loopRun{l: l, w: w, k: k, m: m, frozenAt: k.CgroupFrozen(m)}
	l.Stop()
	if len(samples) == 0 {
		t.Fatal("no samples")
	}
	r.max, r.p99 = peakAndP99(samples)
	return r
}

func peakAndP99(xs []int64) (peak, p99 int64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)-1], s[len(s)*99/100]
}

// The driver carries out the contract: the closed loop freezes and thaws
// the cgroup (held freezes), no freeze outlasts MaxPause by more than the
// reaction delay (the driver's HoldFor timer thaws it however late a
// step), the decisions never hold a cgroup the driver has thawed, and
// Stop leaves nothing frozen. With the tracker the driver is woken by
// it, and dirty+writeback stays within 1.25 × dirty_bytes at p99.
func TestLoopCarriesOutTheContract(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tracker  bool
		reaction time.Duration
		p99Bound float64 // × dirty_bytes; 0: not checked
	}{
		{"tracker, 1 ms", true, time.Millisecond, 1.25},
		{"fallback polling, 1 ms", false, time.Millisecond, 1.25},
		{"tracker, 50 ms", true, 50 * time.Millisecond, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runLoop(t, tc.tracker, tc.reaction)
			h := r.l.H
			ratio := float64(r.p99*kernel.PageSize) / float64(16<<20)
			t.Logf("p99 %.2f × dirty_bytes (max %d MiB), writer done at %.2f s, %d steps, %d wake-ups, %d freezes (%d by RunFor, %d thaws at HoldFor), longest %v, %.2f s frozen",
				ratio, r.max*kernel.PageSize>>20, r.w.Finished.Seconds(), r.l.Steps, r.l.Wakeups, h.Freezes, r.l.DriverFreezes, r.l.DriverThaws, h.LongestFreeze, h.Frozen.Seconds())
			if r.w.Finished == 0 {
				t.Fatalf("the writer did not finish")
			}
			if h.Freezes == 0 || h.Pauses != 0 {
				t.Errorf("%d held freezes, %d timed pauses: want held freezes only", h.Freezes, h.Pauses)
			}
			if h.LongestFreeze > policy.MaxPause+tc.reaction {
				t.Errorf("a freeze lasted %v, past MaxPause %v and the reaction delay", h.LongestFreeze, policy.MaxPause)
			}
			if r.l.Violations != 0 || r.l.Errors != 0 {
				t.Errorf("%d contract violations, %d errors", r.l.Violations, r.l.Errors)
			}
			if r.k.CgroupFrozen(r.m) {
				t.Errorf("Stop left the cgroup frozen")
			}
			if tc.tracker && r.l.Wakeups == 0 {
				t.Errorf("the tracker never woke the driver")
			}
			if tc.p99Bound > 0 && ratio > tc.p99Bound {
				t.Errorf("p99 dirty+writeback %.2f × dirty_bytes, want ≤ %.2f", ratio, tc.p99Bound)
			}
		})
	}
}
