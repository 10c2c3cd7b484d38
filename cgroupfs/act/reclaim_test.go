package act_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/act"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/journal"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
)

// reclaimSize is the setting of the reclaim tests: a cgroup limited to
// limit holds cache bytes of page cache, and ask is reclaimed.
type reclaimSize struct{ limit, cache, ask uint64 }

// reclaimSizes returns 256 MiB, 200 MiB and 64 MiB, or the same
// proportions scaled down to a cache of at most what the disk writes in two
// seconds, if the test VM says it throttles the disk (MEMCGD_VM_WRITE_BPS),
// and at most half the global background threshold, so that the cache of
// the dirty scenario stays dirty.
func reclaimSizes(t *testing.T) reclaimSize {
	t.Helper()
	full := reclaimSize{limit: 256 * mib, cache: 200 * mib, ask: 64 * mib}
	cache := min(full.cache, cgrouptest.BackgroundThreshold(t)/2)
	if v := os.Getenv("MEMCGD_VM_WRITE_BPS"); v != "" {
		bps, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("MEMCGD_VM_WRITE_BPS=%q: %v", v, err)
		}
		if bps > 0 {
			cache = min(cache, 2*bps)
		}
	}
	scale := func(v uint64) uint64 { return (v * (cache / mib) / (full.cache / mib)) &^ (mib - 1) }
	return reclaimSize{limit: scale(full.limit), cache: scale(full.cache), ask: scale(full.ask)}
}

// A page cache scenario: how the cgroup came to hold size bytes.
type scenario struct {
	name  string
	dirty bool // whether the cache is left dirty
	// fill charges size bytes of page cache to c, writing file.
	fill func(t *testing.T, c *cgrouptest.Cgroup, file string, size uint64)
}

var scenarios = []scenario{
	{"clean cache, writer exited", false, writeSynced},
	{"clean cache, writer running", false, func(t *testing.T, c *cgrouptest.Cgroup, file string, size uint64) {
		writeSynced(t, c, file, size)
		// A writer that keeps the file open for writing, as a database
		// does. (cgrouptest.StartWriter leaves its pages dirty, and a v2
		// memcg's dirty throttling makes it slow to write them.)
		holder := c.Start(t, "sh", "-c", `exec 5>>"$0" && exec sleep 3600`, file)
		cgrouptest.AwaitOpen(t, holder.Process.Pid, file)
	}},
	{"dirty cache, writer running", true, func(t *testing.T, c *cgrouptest.Cgroup, file string, size uint64) {
		cgrouptest.StartWriter(t, c, file, int64(size))
	}},
}

// writeSynced writes size bytes to file from a process in c that fsyncs
// and exits: c holds size bytes of clean page cache.
func writeSynced(t *testing.T, c *cgrouptest.Cgroup, file string, size uint64) {
	t.Helper()
	cmd := c.Start(t, "dd", "if=/dev/zero", "of="+file, "bs=1M", "count="+strconv.FormatUint(size/mib, 10), "conv=fsync")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("dd: %v", err)
	}
}

// seed 001: reclaim of N MiB lowers the cgroup's usage by at least N/2 MiB.
func TestReclaimLowersUsage(t *testing.T) {
	l := cgrouptest.Layout(t)
	dir := cgrouptest.DiskDir(t)
	sz := reclaimSizes(t)
	// Clean page cache only: v2's memory.reclaim does not write dirty
	// pages back (mm/vmscan.c shrink_folio_list). TestReclaimV1Methods
	// measures the dirty case on v1.
	for _, sc := range scenarios[:2] {
		t.Run(sc.name, func(t *testing.T) {
			// No limit: on v2 a small one would pace the writer to the
			// memcg's dirty domain, and the squeeze works from any limit.
			c := cgrouptest.New(t, l, 0)
			sc.fill(t, c, filepath.Join(dir, "cache"), sz.cache)
			j := cgrouptest.Journal(t, l)
			before, limitBefore := c.Usage(t), limit(t, l, c)
			start := time.Now()
			got, err := act.Reclaim(context.Background(), l, c.Path, sz.ask, 0, j, nil)
			took := time.Since(start)
			after := c.Usage(t)
			t.Logf("Reclaim(%d MiB) on %s: %.1f MiB in %v, usage %.1f -> %.1f MiB",
				sz.ask/mib, l.Memory.Version, float64(got)/mib, took.Round(time.Microsecond), float64(before)/mib, float64(after)/mib)
			if err != nil {
				t.Fatalf("Reclaim: %v", err)
			}
			if got < sz.ask/2 || before < after+sz.ask/2 {
				t.Errorf("Reclaim(%d MiB) = %d MiB, usage %d -> %d MiB; want a fall of at least %d MiB",
					sz.ask/mib, got/mib, before/mib, after/mib, sz.ask/2/mib)
			}
			if p := j.Pending(); len(p) != 0 {
				t.Errorf("journal after Reclaim holds %v, want nothing pending", p)
			}
			if got := limit(t, l, c); got != limitBefore {
				t.Errorf("limit after Reclaim = %s, want %s restored", got, limitBefore)
			}
		})
	}
}

// A request decided on a reading of usage that has fallen since by more
// than it asks reclaims nothing: the cgroup gave that back by itself (a
// task's own reclaim at the limit). Decided on the usage now, the same
// request reclaims.
func TestReclaimCountsAFallSinceTheObservation(t *testing.T) {
	l := cgrouptest.Layout(t)
	sz := reclaimSizes(t)
	c := cgrouptest.New(t, l, 0)
	cmd := c.Start(t, "dd", "if=/dev/zero", "of="+filepath.Join(cgrouptest.DiskDir(t), "cache"), "bs=64k",
		"count="+strconv.FormatUint(sz.cache/(64<<10), 10), "conv=fsync")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("dd: %v", err)
	}
	j := cgrouptest.Journal(t, l)
	const ask = 4 * mib
	before := c.Usage(t)
	got, err := act.Reclaim(context.Background(), l, c.Path, ask, before+2*ask, j, nil)
	if err != nil || got != 0 {
		t.Errorf("Reclaim of %d KiB decided at a usage %d KiB above now: got %d KiB, %v; want nothing", ask>>10, 2*ask>>10, got>>10, err)
	}
	if after := c.Usage(t); fellBy(before, after) > ask/4 {
		t.Errorf("usage fell %d KiB though nothing was left to reclaim", fellBy(before, after)>>10)
	}
	got, err = act.Reclaim(context.Background(), l, c.Path, ask, c.Usage(t), j, nil)
	if err != nil || got < ask/2 {
		t.Errorf("Reclaim of %d KiB decided at the usage now: got %d KiB, %v; want at least half", ask>>10, got>>10, err)
	}
}

// Seed 001's kswapd stops at high_wmark, so the daemon's reclaim must not
// take much more than it asks: a request of N bytes lowers usage by no
// more than N and 512 KiB, the most a background reclaim run may end past
// high_wmark, on v2 (memory.reclaim, which may reclaim more than asked)
// and on v1 (the limit squeeze), from small requests to a chunk's worth.
// What the kernel takes past a request is its batches (SWAP_CLUSTER_MAX
// pages a call, checked between batches) and whole folios: the cache is
// written in 64 KiB writes, so that its folios are no larger.
func TestReclaimEndsCloseToTheRequest(t *testing.T) {
	l := cgrouptest.Layout(t)
	dir := cgrouptest.DiskDir(t)
	sz := reclaimSizes(t)
	const slack = 512 << 10
	for _, ask := range []uint64{128 << 10, 1 * mib, 4 * mib, min(16*mib, sz.cache/4)} {
		t.Run(strconv.FormatUint(ask>>10, 10)+"KiB", func(t *testing.T) {
			c := cgrouptest.New(t, l, 0)
			// 64 KiB writes: folios no larger (ext4's large folios follow
			// the write size), since reclaim frees whole folios.
			cmd := c.Start(t, "dd", "if=/dev/zero", "of="+filepath.Join(dir, "cache"), "bs=64k",
				"count="+strconv.FormatUint(sz.cache/(64<<10), 10), "conv=fsync")
			if err := cmd.Wait(); err != nil {
				t.Fatalf("dd: %v", err)
			}
			j := cgrouptest.Journal(t, l)
			before := c.Usage(t)
			got, err := act.Reclaim(context.Background(), l, c.Path, ask, 0, j, nil)
			after := c.Usage(t)
			t.Logf("Reclaim(%d KiB) on %s: usage fell %d KiB (%+d KiB past the request)",
				ask>>10, l.Memory.Version, fellBy(before, after)>>10, (int64(fellBy(before, after))-int64(ask))>>10)
			if err != nil {
				t.Fatalf("Reclaim: %v", err)
			}
			if fall := fellBy(before, after); fall > ask+slack {
				t.Errorf("usage fell %d KiB for %d KiB asked: %d KiB past the request, want at most %d KiB",
					fall>>10, ask>>10, (fall-ask)>>10, slack>>10)
			}
			if got < ask/2 {
				t.Errorf("Reclaim(%d KiB) = %d KiB, want at least half", ask>>10, got>>10)
			}
		})
	}
}

// fellBy is how far usage fell from before to after, 0 if it rose.
func fellBy(before, after uint64) uint64 {
	if after >= before {
		return 0
	}
	return before - after
}

// limit reads the cgroup's hard limit: v1 memory.limit_in_bytes, v2
// memory.max.
func limit(t *testing.T, l layout.Layout, c *cgrouptest.Cgroup) string {
	t.Helper()
	file := "memory.max"
	if l.Memory.Version == layout.V1 {
		file = journal.FileLimitV1
	}
	v, err := ctlfile.Read(filepath.Join(c.Dir, file))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The two ways to reclaim on cgroup v1, side by side: how much of a 64 MiB
// request each gets from 200 MiB of page cache, how fast, and whether a
// sibling's dirty pages get written meanwhile. docs/actuators.md cites this
// output.
func TestReclaimV1Methods(t *testing.T) {
	l := cgrouptest.Layout(t)
	if l.Memory.Version != layout.V1 {
		t.Skip("the v1 methods apply to a v1 memory controller; this host has it on v2")
	}
	dir := cgrouptest.DiskDir(t)
	sz := reclaimSizes(t)
	type method struct {
		name string
		run  func(c *cgrouptest.Cgroup, j *journal.Journal) (uint64, error)
	}
	methods := []method{
		{"fadvise", func(c *cgrouptest.Cgroup, _ *journal.Journal) (uint64, error) {
			return act.FadviseV1(context.Background(), "/proc", c.Dir, sz.ask)
		}},
		{"squeeze", func(c *cgrouptest.Cgroup, j *journal.Journal) (uint64, error) {
			return act.SqueezeV1(context.Background(), c.Dir, sz.ask, j)
		}},
	}
	// What each method must achieve. fadvise cannot reach files no task
	// has open, and on dirty pages only starts their write-out. The
	// squeeze steps only while clean file pages are plentiful (issue 9,
	// defect 9: dirty pages cannot be reclaimed at once, so they leave no
	// headroom for the cgroup's charges while its limit is lowered).
	want := map[string]map[string]bool{
		"fadvise": {scenarios[0].name: false, scenarios[1].name: true, scenarios[2].name: false},
		"squeeze": {scenarios[0].name: true, scenarios[1].name: true, scenarios[2].name: false},
	}
	for _, sc := range scenarios {
		for _, m := range methods {
			t.Run(m.name+"/"+sc.name, func(t *testing.T) {
				// A sibling's dirty pages show whether the method's
				// write-out stays within the cgroup.
				sibling := cgrouptest.New(t, l, 0)
				cgrouptest.StartWriter(t, sibling, filepath.Join(dir, "sibling"), min(32*mib, cgrouptest.DirtySize(t)))
				c := cgrouptest.New(t, l, sz.limit)
				sc.fill(t, c, filepath.Join(dir, "cache"), sz.cache)
				j := cgrouptest.Journal(t, l)
				before, dirtyBefore, siblingBefore := c.Usage(t), c.Dirty(t), sibling.Dirty(t)
				limitBefore := limit(t, l, c)
				if sc.dirty && dirtyBefore < sz.cache/2 {
					t.Fatalf("precondition: %.1f MiB of %d MiB dirty; the flushers wrote the cache back first", float64(dirtyBefore)/mib, sz.cache/mib)
				}
				start := time.Now()
				got, err := m.run(c, j)
				took := time.Since(start)
				kept := 100 * float64(sibling.Dirty(t)) / float64(max(siblingBefore, 1))
				t.Logf("%-8s %-28s asked %d MiB: got %5.1f MiB in %9v (usage %.1f MiB, dirty %.1f MiB before; sibling kept %.0f%% of its dirty); err=%v",
					m.name, sc.name, sz.ask/mib, float64(got)/mib, took.Round(time.Microsecond),
					float64(before)/mib, float64(dirtyBefore)/mib, kept, err)
				if err != nil && !errors.Is(err, host.ErrNothingReclaimed) {
					t.Fatal(err)
				}
				// fadvise on dirty pages starts their write-out and drops
				// whatever finished meanwhile: on a fast device (the v1
				// VM's virtio disk) that can be most of the request, so
				// only the measurement is kept, not a verdict.
				timingBound := m.name == "fadvise" && sc.dirty
				if reaches := got >= sz.ask/2; reaches != want[m.name][sc.name] && !timingBound {
					t.Errorf("%s reclaimed %d MiB of %d MiB asked: reaches half = %v, want %v",
						m.name, got/mib, sz.ask/mib, reaches, want[m.name][sc.name])
				}
				if got := limit(t, l, c); got != limitBefore {
					t.Errorf("limit after the %s = %s, want %s restored", m.name, got, limitBefore)
				}
			})
		}
	}
}
