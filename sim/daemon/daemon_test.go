package daemon

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/memcgd/memcgd/host"
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
// reclaim lowers usage, pauses stop the cgroup's tasks, and the clock is
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
	wo, err := h.WriteOut(ctx, "/a")
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
	got, err := h.Reclaim(ctx, "/a", 8<<20)
	sa, _ = h.Observe(ctx, "/a")
	if err != nil || got < 8<<20 || before-sa.Usage != got {
		t.Errorf("reclaim 8M: got %d (%v), usage %d → %d", got, err, before, sa.Usage)
	}
	if want := time.Duration(k.Now()); h.Now().Sub(epoch) != want {
		t.Errorf("clock %v, want %v after the epoch", h.Now().Sub(epoch), want)
	}
}

// The driver runs memcgd's policy on the simulated clock: with dirty_bytes
// 16M on a v1 cgroup, which has no dirty limit of its own, a writer paced
// at 100 MiB/s keeps its dirty pages near the limit, as E2 paced did on
// the real kernel (p99 0.75 × dirty_bytes); without the daemon the
// cgroup fills with dirty pages.
func TestDriverBoundsDirtyOnV1(t *testing.T) {
	for _, withDaemon := range []bool{false, true} {
		k := newKernel(t, 1)
		m := k.NewMemcg(0, "/exp", 100<<20, -1)
		kn := memcg.DefaultKnobs()
		if err := kn.Apply(map[string]string{"dirty_bytes": "16M", "dirty_background_bytes": "8M"}); err != nil {
			t.Fatal(err)
		}
		k.SetKnobs(m, kn)
		w := &workload.Writer{Ino: k.NewInode(0), Pages: 512 << 8, Block: 256, Accesses: 1, Rate: 100 << 8}
		k.NewTask("w", m, w, 0)
		var d *Driver
		if withDaemon {
			d = &Driver{H: NewHost(k), Interval: 50 * time.Millisecond, Latency: time.Millisecond,
				Managed: []Managed{{Chain: []host.Cgroup{"/exp"}, Knobs: []memcg.Knobs{kn}}}}
			d.Start(k)
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
			if peakMiB > 24 || d.Steps == 0 || d.H.WriteOuts == 0 {
				t.Errorf("with memcgd: peak dirty+writeback %d MiB, %d steps, %d write-outs: want ≤ 1.5 × 16M", peakMiB, d.Steps, d.H.WriteOuts)
			}
		} else if peakMiB < 64 {
			t.Errorf("without memcgd: peak %d MiB: want the cgroup to fill with dirty pages", peakMiB)
		}
	}
}
