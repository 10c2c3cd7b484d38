package daemon

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
)

// Seed 004, "write-out in the background past the background threshold":
// a cgroup holding far more dirty page cache than its
// dirty_background_bytes, which the kernel would leave dirty for half a
// minute (the global thresholds are far higher, dirty_expire_centisecs is
// 30 s), is written out by the daemon within seconds, by a targeted
// write-out of its own files, while its writer keeps the file open.
func TestDaemonWritesOutPastBackground(t *testing.T) {
	l := cgrouptest.Layout(t)
	const (
		background = 8 * mib  // dirty_background_bytes
		dirtyBytes = 64 * mib // dirty_bytes: the throttle stays out of the way
		written    = 48 * mib
		// control is how long the kernel alone is watched: well inside
		// dirty_expire_centisecs, and shorter than
		// dirty_writeback_centisecs (5 s), after which a flusher whose
		// wb has no writeout history yet (a new cgroup's on v2, a freshly
		// mounted disk's) finds any dirty page over its share of the
		// background threshold (mm/page-writeback.c wb_over_bg_thresh,
		// __wb_calc_thresh) and writes it out.
		control = 3 * time.Second
	)
	within := 5 * time.Second * slow()

	parent := cgrouptest.New(t, l, 0)
	c := parent.Child(t, "writer")
	file := filepath.Join(diskDir(t), "dirty")

	// Control: without the daemon the pages stay dirty. A sync(1) by
	// another process on a shared machine writes them out too, so a
	// control that fails is tried again, with a fresh writer, a few times.
	const tries = 3
	for try := 1; ; try++ {
		w := cgrouptest.StartWriter(t, c, file, written)
		time.Sleep(control)
		dirty := observe(t, l, c).Dirty
		if dirty >= written*3/4 {
			break
		}
		if try == tries {
			t.Fatalf("without the daemon, %d MiB of the %d MiB written were still dirty after %v, want at least %d MiB "+
				"(%d tries): the kernel writes them out itself, so this host cannot show the daemon's write-out",
				dirty/mib, written/mib, control, written*3/4/mib, tries)
		}
		t.Logf("control %d: only %d MiB of %d MiB still dirty after %v (another process's sync?); trying again", try, dirty/mib, written/mib, control)
		w.Process.Kill()
		w.Wait()
	}

	d := newDaemon(t, managedConfig(parent.Path, fmt.Sprintf(
		"dirty_background_bytes: %d, dirty_bytes: %d, min_free_kbytes: 0, writeback_first: true", background, dirtyBytes)))
	d.start()
	// A daemon slow to start (the eBPF tracker loads in seconds under
	// qemu's emulation) can find the kernel's flusher already at work:
	// past dirty_writeback_centisecs it writes out a new cgroup's pages
	// itself (see control). Then dirty again, with the daemon running,
	// so that the pages are the daemon's to write out.
	if dirty := observe(t, l, c).Dirty; dirty < 2*background {
		t.Logf("the kernel wrote out %d of %d MiB while the daemon started; dirtying again", (written-dirty)/mib, written/mib)
		cgrouptest.StartWriter(t, c, file+"2", written)
	}
	var dirty uint64
	took, ok := poll(within, 50*time.Millisecond, func() bool {
		dirty = observe(t, l, c).Dirty
		return dirty < 2*background
	})
	if !ok {
		t.Fatalf("with the daemon, dirty is still %d MiB after %v, want below 2 x dirty_background_bytes = %d MiB",
			dirty/mib, within, 2*background/mib)
	}
	t.Logf("dirty fell from %d MiB to %d MiB (dirty_background_bytes %d MiB, dirty_bytes %d MiB) %v after the daemon started",
		written/mib, dirty/mib, background/mib, dirtyBytes/mib, took.Round(time.Millisecond))

	// The write-out may be the parent's: its threshold is the same and
	// its dirty pages are its children's (memory.stat is hierarchical),
	// and its write-out covers its subtree's tasks.
	var s, ps map[string]uint64
	if _, ok := poll(within, 50*time.Millisecond, func() bool {
		s, ps = d.stat(c.Path), d.stat(parent.Path)
		return s["dirty_background_thresh"] == background && s["writeout_targeted"]+ps["writeout_targeted"] > 0
	}); !ok {
		t.Errorf("memcgd stat: dirty_background_thresh %d (want %d), writeout_targeted %d and %d in its parent (want one at least): "+
			"the write-out was not the daemon's (writeout_flush %d and %d)", s["dirty_background_thresh"], background,
			s["writeout_targeted"], ps["writeout_targeted"], s["writeout_flush"], ps["writeout_flush"])
	}
	t.Logf("daemon: writeout_targeted %d (%d MiB dirty when they began) and %d in the parent, writeout_flush %d, throttle_pauses %d",
		s["writeout_targeted"], s["writeout_targeted_bytes"]/mib, ps["writeout_targeted"], s["writeout_flush"]+ps["writeout_flush"], s["throttle_pauses"])
}
