package daemon

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	cgobserve "github.com/memcgd/memcgd/cgroupfs/observe"
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
		// 64 KiB writes: the page cache comes in folios no larger (ext4's
		// large folios follow the write size, up to 1 MiB for dd bs=1M),
		// and reclaim frees whole folios, so that a run's end is the
		// daemon's and not a folio's.
		dd := c.Start(t, "dd", "if=/dev/zero", "of="+file, "bs=64k", "count="+strconv.Itoa(fill/(64<<10)), "conv=fsync")
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
	if s.Free() > w.High+512<<10 {
		t.Errorf("free %d KiB after the run, want high_wmark %d KiB, at most 512 KiB past it: reclaim went on past high_wmark", s.Free()>>10, w.High>>10)
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

// Seed 001's kswapd stops where free reaches high_wmark, so a cgroup
// filled with page cache is held at its limit less high_wmark, no lower:
// a kernel engineer's test that writes 50 MiB of page cache into a 30 MiB
// cgroup and expects it full must not fail because memcgd runs. Each
// round has the cgroup's writer write page cache until free is below
// low_wmark (the first round 50 MiB, the next ones twice high_wmark
// more), waits for the daemon's background reclaim to settle, and checks
// where it left free: at most 512 KiB past high_wmark, and at low_wmark
// or above (a run ends at high_wmark; the kernel memory the cgroup charges
// after it, and the charge stock, may take free below high again, where
// the kswapd sleeps until low_wmark, as seed 001's does). The writer lives
// on through the rounds: a process that exits
// uncharges its own memory (a dd's 1 MiB buffer, its page tables), which
// would raise free past high_wmark by itself. With the default policy
// high_wmark is about 1 MiB; with min_free_kbytes 8192, 12 MiB.
func TestDaemonReclaimRunsEndAtHighWmark(t *testing.T) {
	l := cgrouptest.Layout(t)
	const (
		limit = 30 * mib
		slack = 512 << 10
	)
	for _, tt := range []struct {
		name     string
		defaults string
		knobs    memcg.Knobs
	}{
		{"default policy", "dirty_ratio: 10, dirty_background_ratio: 5, min_free_kbytes: auto, writeback_first: true",
			memcg.Knobs{MinFreeKbytes: memcg.MinFreeAuto}},
		{"min_free_kbytes 8192", "dirty_ratio: 10, dirty_background_ratio: 5, min_free_kbytes: 8192, writeback_first: true",
			memcg.Knobs{MinFreeKbytes: 8192}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.knobs.Watermarks(limit)
			parent := cgrouptest.New(t, l, 0)
			c := parent.Child(t, "fill")
			setLimit(t, l, c, limit)
			d := newDaemon(t, managedConfig(parent.Path, tt.defaults), "--log-level", "debug")
			d.start()
			defer func() {
				if t.Failed() {
					t.Logf("the daemon's last reclaim attempts:\n%s", lastLines(d.logText(), "reclaim attempt", 20))
				}
			}()

			// Free memory every millisecond throughout, for the log: the
			// kernel's own reclaim at the limit is in it too.
			peak := make(chan uint64)
			stop := make(chan struct{})
			go func() { peak <- peakFree(l, c, w.Low, stop) }()
			defer func() {
				close(stop)
				t.Logf("peak free after the first time below low_wmark, sampled every ms: %d KiB (high_wmark %d KiB)", <-peak>>10, w.High>>10)
			}()

			// The host's own reclaim takes pages from every cgroup: a
			// kswapd woken by the page cache earlier tests left behind
			// (a 1 GiB VM) would take the cgroup's below high_wmark
			// with no help from the daemon. Each round counts what it
			// took, for the failure's message.
			more := (max(2*w.High, 4*mib) + mib - 1) / mib
			sizes := []uint64{50, more, more} // MiB
			pc := startPageCache(t, c, diskDir(t), sizes)
			runs, reclaimed := uint64(0), uint64(0)
			for i, size := range sizes {
				kswapd := hostKswapdSteal(t)
				pc.round(t, i, 30*time.Second*slow())
				s, st, most, settled := settle(t, d, l, c, w, 10*time.Second*slow())
				host := (hostKswapdSteal(t) - kswapd) * memcg.PageSize
				if !settled {
					// The v1 squeeze drains the per-CPU charge stock
					// (mm/memcontrol-v1.c mem_cgroup_resize_max,
					// drain_all_stock), which the cgroup's next charges take
					// back, MEMCG_CHARGE_BATCH pages per CPU at a time: more
					// than high - low under a small limit, so free can fall
					// below low_wmark again as soon as a run ends, and the
					// kswapd keep reclaiming the stock. What matters here is
					// that free never ends past high_wmark by more than the
					// slack: checked on the most free seen meanwhile.
					t.Logf("round %d: reclaim did not settle within %v (free %d KiB, at most %d KiB meanwhile; low_wmark %d KiB): checking the most",
						i+1, 10*time.Second*slow(), s.Free()>>10, most>>10, w.Low>>10)
					if most > w.High+slack {
						t.Errorf("round %d: free reached %d KiB while reclaim went on, want at most %d KiB past high_wmark %d KiB (the host's kswapd took %d KiB from all cgroups meanwhile)",
							i+1, most>>10, slack>>10, w.High>>10, host>>10)
					}
					continue
				}
				t.Logf("round %d: wrote %d MiB; settled at usage %d KiB (file %d, dirty %d, writeback %d, anon %d KiB), free %d KiB (low_wmark %d KiB, high_wmark %d KiB); pgoutrun %d, reclaimed %d KiB, reclaim_overshoot %d KiB; the host's kswapd took %d KiB from all cgroups",
					i+1, size, s.Usage>>10, s.File>>10, s.Dirty>>10, s.Writeback>>10, s.Anon>>10, s.Free()>>10, w.Low>>10, w.High>>10,
					st["pgoutrun"], st["reclaimed_bytes"]>>10, st["reclaim_overshoot_bytes"]>>10, host>>10)
				// The kswapd reclaimed this round: a run began, or one
				// begun before went on (a run ends only once free reaches
				// high_wmark, which a round may leave it short of).
				if st["pgoutrun"] <= runs && st["reclaimed_bytes"] <= reclaimed {
					t.Errorf("round %d: pgoutrun %d, reclaimed %d KiB, want a background reclaim run since the last round (%d runs, %d KiB)",
						i+1, st["pgoutrun"], st["reclaimed_bytes"]>>10, runs, reclaimed>>10)
				}
				runs, reclaimed = st["pgoutrun"], st["reclaimed_bytes"]
				if free := s.Free(); free < w.Low || free > w.High+slack {
					t.Errorf("round %d: free %d KiB after the runs, want low_wmark %d KiB up to %d KiB past high_wmark %d KiB (usage %d KiB of %d KiB; the host's kswapd took %d KiB from all cgroups meanwhile)",
						i+1, free>>10, w.Low>>10, slack>>10, w.High>>10, s.Usage>>10, limit>>10, host>>10)
				}
			}
		})
	}
}

// pageCacheHelper is the first argument that makes the test binary the
// page cache writer.
const pageCacheHelper = "memcgd-test-pagecache-helper"

// runPageCacheHelper writes, for each of sizes (MiB, comma-separated), a
// file of that size in dir in 64 KiB writes, not synced, once dir holds
// go-N (N from 0), and reports each with done-N; then it sleeps, holding
// its memory, until killed.
func runPageCacheHelper(dir, sizes string) int {
	buf := make([]byte, 64<<10)
	for i, f := range strings.Split(sizes, ",") {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: size %q: want MiB\n", pageCacheHelper, f)
			return 2
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("go-%d", i))); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		file, err := os.Create(filepath.Join(dir, fmt.Sprintf("cache-%d", i)))
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", pageCacheHelper, err)
			return 1
		}
		for written := uint64(0); written < n*mib; {
			m, err := file.Write(buf)
			// A freeze by the throttle interrupts a write (a fake
			// signal): it returns short, and the loop goes on.
			written += uint64(m)
			if err != nil && !errors.Is(err, syscall.EINTR) {
				fmt.Fprintf(os.Stderr, "%s: write: %v\n", pageCacheHelper, err)
				return 1
			}
		}
		if err := file.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", pageCacheHelper, err)
			return 1
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("done-%d", i)), nil, 0o600); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", pageCacheHelper, err)
			return 1
		}
	}
	for {
		time.Sleep(time.Hour)
	}
}

// pageCache is a running page cache writer in a cgroup.
type pageCache struct {
	dir string
	cmd *exec.Cmd
}

// startPageCache starts the page cache writer in c, its files in dir.
func startPageCache(t *testing.T, c *cgrouptest.Cgroup, dir string, sizes []uint64) *pageCache {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var list []string
	for _, s := range sizes {
		list = append(list, strconv.FormatUint(s, 10))
	}
	return &pageCache{dir: dir, cmd: c.Start(t, exe, pageCacheHelper, dir, strings.Join(list, ","))}
}

// round has the writer write its i-th file and waits until it has.
func (p *pageCache) round(t *testing.T, i int, within time.Duration) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(p.dir, fmt.Sprintf("go-%d", i)), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := poll(within, 10*time.Millisecond, func() bool {
		_, err := os.Stat(filepath.Join(p.dir, fmt.Sprintf("done-%d", i)))
		return err == nil
	}); !ok {
		t.Fatalf("round %d: the page cache writer did not finish within %v (stderr %q)", i+1, within, p.cmd.Stderr)
	}
}

// settle waits until the daemon's background reclaim of c has stopped:
// free at low_wmark or above, and neither usage nor the daemon's reclaimed
// bytes moving over three looks 100 ms apart. It returns c's state and
// the daemon's stat then, the most free it saw while it waited, and
// whether reclaim settled at all.
func settle(t *testing.T, d *daemon, l layout.Layout, c *cgrouptest.Cgroup, w memcg.Watermarks, within time.Duration) (memcg.Stat, map[string]uint64, uint64, bool) {
	t.Helper()
	var (
		s      memcg.Stat
		st     map[string]uint64
		last   [2]uint64
		stable int
		most   uint64
	)
	_, ok := poll(within, 100*time.Millisecond, func() bool {
		s, st = observe(t, l, c), d.stat(c.Path)
		most = max(most, s.Free())
		now := [2]uint64{s.Usage, st["reclaimed_bytes"]}
		if s.Free() >= w.Low && now == last {
			stable++
		} else {
			stable = 0
		}
		last = now
		return stable >= 3
	})
	return s, st, most, ok
}

// peakFree samples c's free memory (limit - usage) every millisecond until
// stop closes, and returns the most it saw after it first saw free below
// low.
func peakFree(l layout.Layout, c *cgrouptest.Cgroup, low uint64, stop <-chan struct{}) uint64 {
	r := cgobserve.NewReader(l)
	defer r.Close()
	var peak uint64
	below := false
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return peak
		case <-tick.C:
		}
		s, err := r.Observe(c.Path)
		if err != nil {
			continue
		}
		free := s.Free()
		below = below || free < low
		if below {
			peak = max(peak, free)
		}
	}
}

// hostKswapdSteal is how many pages the host's kswapd has reclaimed since
// boot, from every cgroup (/proc/vmstat pgsteal_kswapd). The daemon's
// reclaim is not in it: a write to memory.reclaim or to a v1 limit
// reclaims in the writing task, counted as pgsteal_direct
// (mm/vmscan.c shrink_inactive_list).
func hostKswapdSteal(t *testing.T) uint64 {
	t.Helper()
	return cgrouptest.ProcValue(t, "/proc/vmstat", "pgsteal_kswapd")
}

// lastLines returns the last n lines of text that contain word.
func lastLines(text, word string, n int) string {
	var out []string
	for line := range strings.Lines(text) {
		if strings.Contains(line, word) {
			out = append(out, line)
		}
	}
	return strings.Join(out[max(len(out)-n, 0):], "")
}
