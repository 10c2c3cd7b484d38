package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/internal/stats"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/sim/kernel"
	"github.com/memcgd/memcgd/sim/workload"
)

func newKernel(t *testing.T, v int) *kernel.Kernel {
	t.Helper()
	k, err := kernel.New(kernel.Config{CgroupVersion: v, MemoryPages: 4 << 18,
		VMDirty:             memcg.Knobs{DirtyRatio: 20, DirtyBackgroundRatio: 10},
		DirtyExpireInterval: 30 * kernel.Second, DirtyWritebackInterval: 5 * kernel.Second,
		WriteCostPerPage: 250, ScanCostPerPage: 50,
		Disks: []kernel.DiskConfig{{Name: "vda", WriteBandwidth: 200 << 20, ReadBandwidth: 200 << 20, NrRequests: 32, MaxRequestPages: 128}}},
		kernel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// The Host is the simulated kernel as memcgd sees it: observations match
// the kernel's counters, write-out touches only the cgroup's own files,
// reclaim lowers usage, and the clock is
// the simulated one.
func TestHost(t *testing.T) {
	ctx := context.Background()
	k := newKernel(t, 1)
	a := k.NewMemcg(0, "/a", 64<<20, -1)
	b := k.NewMemcg(0, "/b", -1, -1)
	wa := &workload.Writer{Ino: k.NewInode(0), Pages: 4096, Block: 4096, Accesses: 1}
	wb := &workload.Writer{Ino: k.NewInode(0), Pages: 2048, Block: 2048, Accesses: 1}
	k.NewTask("a", a, wa, 0)
	k.NewTask("b", b, wb, 0)
	k.Run(kernel.Millisecond)
	h := NewHost(k)
	cgs, err := h.Cgroups(ctx)
	if err != nil || len(cgs) != 3 || cgs[0] != "/" || cgs[1] != "/a" {
		t.Fatalf("cgroups %v, %v", cgs, err)
	}
	sa, err := h.Observe(ctx, "/a")
	if err != nil {
		t.Fatal(err)
	}
	if sa.Dirty != 4096*4096 || sa.Limit != 64<<20 || sa.Usage < sa.Dirty {
		t.Fatalf("observed /a: dirty %d limit %d usage %d", sa.Dirty, sa.Limit, sa.Usage)
	}
	if _, err := h.Observe(ctx, "/gone"); !errors.Is(err, host.ErrVanished) {
		t.Errorf("observe a missing cgroup: %v, want ErrVanished", err)
	}
	wo, err := h.WriteOut(ctx, "/a", sa.Dirty)
	if err != nil || wo.Bytes != 4096*4096 {
		t.Fatalf("write-out: %+v %v", wo, err)
	}
	k.Advance(k.Now() + kernel.Second)
	sa, _ = h.Observe(ctx, "/a")
	sb, _ := h.Observe(ctx, "/b")
	if sa.Dirty != 0 || sa.Writeback != 0 {
		t.Errorf("after write-out /a holds %d dirty, %d writeback", sa.Dirty, sa.Writeback)
	}
	if sb.Dirty != 2048*4096 {
		t.Errorf("write-out of /a touched /b: %d dirty bytes left of %d", sb.Dirty, 2048*4096)
	}
	before := sa.Usage
	got, err := h.Reclaim(ctx, "/a", 8<<20, 0)
	sa, _ = h.Observe(ctx, "/a")
	if err != nil || got < 8<<20 || before-sa.Usage != got {
		t.Errorf("reclaim 8M: got %d (%v), usage %d → %d", got, err, before, sa.Usage)
	}
	if want := time.Duration(k.Now()); h.Now().Sub(epoch) != want {
		t.Errorf("clock %v, want %v after the epoch", h.Now().Sub(epoch), want)
	}
}

// The shipped daemon on the simulated clock: with dirty_bytes 16M on a v1
// cgroup, which has no dirty limit of its own, a writer paced at 100 MiB/s
// keeps its dirty pages near the limit; without the daemon the cgroup
// fills with dirty pages.
func TestTheDaemonBoundsDirtyOnV1(t *testing.T) {
	for _, withDaemon := range []bool{false, true} {
		k := newKernel(t, 1)
		m := k.NewMemcg(0, "/exp", 100<<20, -1)
		w := &workload.Writer{Ino: k.NewInode(0), Pages: 512 << 8, Block: 256, Accesses: 1, Rate: 100 << 8}
		k.NewTask("w", m, w, 0)
		var d *Daemon
		if withDaemon {
			d = &Daemon{H: NewHost(k), Config: dirtyConfig(), ActiveInterval: 50 * time.Millisecond, Latency: time.Millisecond, Tracker: true}
			if err := d.Start(k); err != nil {
				t.Fatal(err)
			}
		}
		var peak int64
		k.Every(0, 10*kernel.Millisecond, func(k *kernel.Kernel) {
			g := k.Gauge(m)
			peak = max(peak, g.Dirty+g.Writeback)
		})
		k.Run(60 * kernel.Second)
		if w.Finished < 4*kernel.Second {
			t.Fatalf("the paced writer finished at %v: not paced", w.Finished)
		}
		peakMiB := peak * kernel.PageSize >> 20
		t.Logf("memcgd %v: peak dirty+writeback %d MiB, writer done at %.1f s", withDaemon, peakMiB, w.Finished.Seconds())
		if withDaemon {
			if err := d.Stop(); err != nil {
				t.Fatal(err)
			}
			if peakMiB > 24 || d.Stats().Steps == 0 || d.H.WriteOuts == 0 {
				t.Errorf("with memcgd: peak dirty+writeback %d MiB, %d steps, %d write-outs: want ≤ 1.5 × 16M", peakMiB, d.Stats().Steps, d.H.WriteOuts)
			}
		} else if peakMiB < 64 {
			t.Errorf("without memcgd: peak %d MiB: want the cgroup to fill with dirty pages", peakMiB)
		}
	}
}

// dirtyConfig is memcgd's policy with dirty_bytes 16M and
// dirty_background_bytes 8M for every limited cgroup.
func dirtyConfig() *config.Config {
	cfg := config.Default()
	cfg.Defaults = memcg.Knobs{DirtyBytes: 16 << 20, DirtyBackgroundBytes: 8 << 20, WritebackFirst: true}
	return cfg
}

// The closed-loop throttle holds an unpaced 1.5 GB/s writer at its
// dirty limit while the 200 MB/s device stays busy, whether the daemon
// learns of the dirtying from the tracker or by polling, and whether its
// reaction takes 1 ms or 50 ms: with a slow reaction the throttle's own
// deadlines (HoldFor, RunFor) keep the sawtooth.
func TestTheClosedLoopHoldsTheLimitAtTheDevicesSpeed(t *testing.T) {
	const (
		limit  = 16 << 20
		device = 200 << 20
	)
	for _, tracker := range []bool{true, false} {
		for _, latency := range []time.Duration{time.Millisecond, 50 * time.Millisecond} {
			t.Run(fmt.Sprintf("tracker %v, reaction %v", tracker, latency), func(t *testing.T) {
				k, err := kernel.New(kernel.Config{CgroupVersion: 1, MemoryPages: 6 << 18,
					VMDirty:             memcg.Knobs{DirtyRatio: 20, DirtyBackgroundRatio: 10},
					DirtyExpireInterval: 30 * kernel.Second, DirtyWritebackInterval: 5 * kernel.Second,
					WriteCostPerPage: 2600, ScanCostPerPage: 100,
					Disks: []kernel.DiskConfig{{Name: "vda", WriteBandwidth: device, ReadBandwidth: device, Latency: 100 * kernel.Microsecond, NrRequests: 64, MaxRequestPages: 256}}},
					kernel.Options{})
				if err != nil {
					t.Fatal(err)
				}
				m := k.NewMemcg(0, "/exp", 100<<20, -1)
				w := &workload.Writer{Ino: k.NewInode(0), Pages: 1 << 18, Block: 256, Accesses: 1}
				k.NewTask("w", m, w, 0)
				d := &Daemon{H: NewHost(k), Config: dirtyConfig(), ActiveInterval: 50 * time.Millisecond, Latency: latency, Tracker: tracker}
				if err := d.Start(k); err != nil {
					t.Fatal(err)
				}
				var samples []int64
				k.Every(500*kernel.Millisecond, kernel.Millisecond, func(k *kernel.Kernel) {
					if w.Finished == 0 {
						g := k.Gauge(m)
						samples = append(samples, (g.Dirty+g.Writeback)*kernel.PageSize)
					}
				})
				k.Run(30 * kernel.Second)
				if err := d.Stop(); err != nil {
					t.Fatal(err)
				}
				if w.Finished == 0 {
					t.Fatalf("the writer did not finish its 1 GiB in 30 s")
				}
				slices.Sort(samples)
				p99 := stats.Percentile(samples, 99)
				rate := float64(int64(1<<18)*kernel.PageSize) / w.Finished.Seconds()
				t.Logf("p99 dirty+writeback %.2f MiB = %.2f × limit; writer %.0f MB/s = %.0f %% of the device; %d steps, %d freezes (%d by RunFor, %d HoldFor thaws), longest %v",
					float64(p99)/(1<<20), float64(p99)/limit, rate/1e6, 100*rate/device, d.Stats().Steps, d.H.Freezes,
					d.Stats().DriverFreezes, d.Stats().DriverThaws, d.H.LongestFreeze)
				if d.H.LongestFreeze > 200*time.Millisecond+latency {
					t.Errorf("frozen %v at a stretch, past MaxPause and the reaction delay", d.H.LongestFreeze)
				}
				if p99 > limit*5/4 {
					t.Errorf("p99 of dirty+writeback %.2f MiB, above 1.25 × the limit", float64(p99)/(1<<20))
				}
				if rate < 0.9*device {
					t.Errorf("writer at %.0f MB/s, below 90 %% of the device's %d", rate/1e6, device>>20)
				}
			})
		}
	}
}
