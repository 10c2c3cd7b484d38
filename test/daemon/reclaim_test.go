package daemon

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/memcg"
)

// Seed 001, "reclaim starts when free drops below low_wmark and runs until
// free reaches high_wmark": a cgroup filled with clean page cache up to
// its limit, by a writer that has exited, is reclaimed by the daemon in
// the background until its free space is back above low_wmark, at about
// high_wmark; `memcgd stat` counts the run (pgoutrun) and the pages taken
// (kswapd_steal).
func TestDaemonBackgroundReclaim(t *testing.T) {
	l := cgrouptest.Layout(t)
	const (
		limit         = 128 * mib
		minFreeKbytes = 4096
		// fill is written and synced: more than the limit, so the kernel's
		// own limit reclaim leaves free near zero, below low_wmark.
		fill = limit + 32*mib
	)
	w := memcg.Knobs{MinFreeKbytes: minFreeKbytes}.Watermarks(limit)
	within := 5 * time.Second * slow()

	parent := cgrouptest.New(t, l, 0)
	c := parent.Child(t, "cache")
	setLimit(t, l, c, limit)
	// Control: the kernel alone leaves free where its limit reclaim left
	// it; only a charge at the limit reclaims again. Its reclaim works in
	// batches and now and then stops with free above low_wmark: then
	// charge again (another file) until it stops below, a few tries.
	var s memcg.Stat
	for try := 1; ; try++ {
		file := filepath.Join(diskDir(t), fmt.Sprintf("clean%d", try))
		dd := c.Start(t, "dd", "if=/dev/zero", "of="+file, "bs=1M", "count="+strconv.Itoa(fill/mib), "conv=fsync")
		if err := dd.Wait(); err != nil {
			t.Fatalf("fill %s: dd: %v (stderr %q)", c.Path, err, dd.Stderr)
		}
		time.Sleep(time.Second)
		if s = observe(t, l, c); s.Free() < w.Low {
			break
		}
		if try == 4 {
			t.Fatalf("a second after writing %d MiB under a %d MiB limit (%d times), free is %d KiB, want below low_wmark %d KiB to start from",
				fill/mib, limit/mib, try, s.Free()>>10, w.Low>>10)
		}
	}

	d := newDaemon(t, managedConfig(parent.Path, fmt.Sprintf(
		"min_free_kbytes: %d, dirty_background_bytes: 64M, dirty_bytes: 96M", minFreeKbytes)))
	d.start()
	before := s
	took, ok := poll(within, 20*time.Millisecond, func() bool {
		s = observe(t, l, c)
		return s.Free() >= w.Low
	})
	if !ok {
		t.Fatalf("free is %d KiB %v after the daemon started, want at least low_wmark %d KiB", s.Free()>>10, within, w.Low>>10)
	}
	// The step that reached low_wmark may still be running: let it end.
	var st map[string]uint64
	poll(2*time.Second*slow(), 50*time.Millisecond, func() bool {
		st = d.stat(c.Path)
		return st["pgoutrun"] >= 1 && st["kswapd_steal"] > 0
	})
	s = observe(t, l, c)
	t.Logf("free went from %d KiB to %d KiB in %v (min %d KiB, low_wmark %d KiB, high_wmark %d KiB); usage %d -> %d MiB",
		before.Free()>>10, s.Free()>>10, took.Round(time.Millisecond), w.Min>>10, w.Low>>10, w.High>>10, before.Usage/mib, s.Usage/mib)
	t.Logf("memcgd stat: pgoutrun %d, kswapd_steal %d pages, reclaimed_bytes %d KiB, allocstall %d",
		st["pgoutrun"], st["kswapd_steal"], st["reclaimed_bytes"]>>10, st["allocstall"])

	if s.Free() < w.Low {
		t.Errorf("free %d KiB after the run, want at least low_wmark %d KiB", s.Free()>>10, w.Low>>10)
	}
	// Reclaim stops at high_wmark: what the kernel takes past it is its
	// batching, not a second run.
	if s.Free() > 2*w.High {
		t.Errorf("free %d KiB after the run, want about high_wmark %d KiB (at most twice it): reclaim went on past high_wmark", s.Free()>>10, w.High>>10)
	}
	for _, f := range []struct {
		name string
		want uint64
	}{{"low_wmark", w.Low}, {"high_wmark", w.High}} {
		if st[f.name] != f.want {
			t.Errorf("memcgd stat: %s %d, want %d (min_free_kbytes %d)", f.name, st[f.name], f.want, minFreeKbytes)
		}
	}
	if st["pgoutrun"] < 1 {
		t.Errorf("memcgd stat: pgoutrun %d, want at least 1 background reclaim run", st["pgoutrun"])
	}
	if st["kswapd_steal"] == 0 {
		t.Errorf("memcgd stat: kswapd_steal 0, want the pages the daemon reclaimed")
	}
}
