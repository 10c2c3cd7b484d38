package kernel

import (
	"testing"
	"time"
)

// Research notes §7.1, validation target 1: a single dd converges on dirty
// near the setpoint, below the limit, with short pauses, and writes at the
// disk's rate.
func TestBalanceDirtyPagesSingleDD(t *testing.T) {
	k := testKernel(t, 2, Options{})
	w := &seqWriter{ino: int64(k.NewInode(0)), pages: 8 << 18, block: 4} // 8G through a 4G machine
	tk := k.NewTask("dd", 0, w, 0)
	var sum, n int64
	var lo, hi int64
	k.Every(0, 10*Millisecond, func(k *Kernel) {
		if k.Now() < 20*Second {
			return
		}
		g := k.globalDtc()
		sum += g.dirty
		n++
		lo, hi = dirtyFreerunCeiling(g.thresh, g.bgThresh), g.limit
	})
	end := k.Run(600 * Second)
	if !tk.Done() || n == 0 {
		t.Fatalf("dd not done by %v", end)
	}
	mean := sum / n
	if mean < lo || mean > hi {
		t.Errorf("mean dirty+writeback %d pages, want between freerun %d and the limit %d", mean, lo, hi)
	}
	rate := float64(tk.Written*PageSize) / tk.End.Seconds()
	if bw := float64(200 << 20); rate < 0.9*bw || rate > 1.1*bw*1.5 {
		t.Errorf("dd wrote at %.0f B/s, want about the disk's %.0f B/s (plus what stays dirty at the end)", rate, bw)
	}
	if tk.Pauses == 0 {
		t.Fatal("no pauses")
	}
	t.Logf("mean dirty %d pages (freerun %d, setpoint %d, limit %d), %.0f MB/s, %d pauses of %v on average",
		mean, lo, (lo+hi)/2, hi, rate/1e6, tk.Pauses, time.Duration(tk.Paused/Time(tk.Pauses)))
	if mp := tk.Paused / Time(tk.Pauses); mp < 4*Millisecond || mp > 200*Millisecond {
		t.Errorf("mean pause %v, want short pauses of at most MAX_PAUSE", mp)
	}
}

// Research notes §7.1, validation target 3: on v2 a memcg with only file
// pages dirties up to roughly dirty_ratio (20%) of its file pages plus
// headroom, and a tighter limit gives lower dirty.
func TestMemcgDirtyDomainV2(t *testing.T) {
	peak := map[int64]int64{}
	for _, limMiB := range []int64{64, 128} {
		k := testKernel(t, 2, Options{})
		m := k.NewMemcg(0, "/w", limMiB<<20, -1)
		tk := k.NewTask("dd", m, &seqWriter{ino: int64(k.NewInode(0)), pages: 1 << 18, block: 4}, 0)
		k.Every(0, Millisecond, func(k *Kernel) {
			c := &k.memcgs[m]
			peak[limMiB] = max(peak[limMiB], c.hstat[msFileDirty]+c.hstat[msFileWriteback])
		})
		k.Run(600 * Second)
		if !tk.Done() {
			t.Fatal("dd not done")
		}
		want := limMiB << 20 / PageSize / 5
		t.Logf("limit %dM: peak dirty+writeback %d pages (20%% = %d)", limMiB, peak[limMiB], want)
		if p := peak[limMiB]; p < want*3/4 || p > want*5/4 {
			t.Errorf("limit %dM: peak dirty+writeback %d pages, want about 20%% of it (%d)", limMiB, p, want)
		}
	}
	if peak[64] >= peak[128] {
		t.Errorf("peak dirty %d pages under 64M, %d under 128M: want less under the tighter limit", peak[64], peak[128])
	}
}
