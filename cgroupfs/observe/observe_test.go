package observe_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/cgroupfs/observe"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// Observe agrees with the kernel's own files on a cgroup with a 64 MiB
// limit and a writer that has dirtied up to 32 MiB, as much as the kernel
// lets it keep dirty (see keptDirtySize), and sleeps holding its file.
//
// The kernel's counters move between two reads (the flusher may start on
// the pages; memory.stat is flushed from per-CPU counters only past a
// threshold of MEMCG_CHARGE_BATCH (64) pages per CPU, mm/memcontrol.c
// memcg_rstat_updated), so the reference is read just before and just
// after Observe and Observe's figure must lie between them, widened by
// that batching: 64 pages for each of the machine's CPUs.
func TestObserveRealKernel(t *testing.T) {
	l := cgrouptest.Layout(t)
	const limit = 64 << 20
	size, why := keptDirtySize(t, l, limit, 32<<20)
	c := cgrouptest.New(t, l, limit)
	cgrouptest.StartWriter(t, c, filepath.Join(t.TempDir(), "data"), int64(size))

	dirtyKey, wbKey, usageFile := "file_dirty", "file_writeback", "memory.current"
	if l.Memory.Version == layout.V1 {
		dirtyKey, wbKey, usageFile = "total_dirty", "total_writeback", "memory.usage_in_bytes"
	}
	before, usageBefore := cgrouptest.StatFile(t, c.Dir), cgrouptest.ValueFile(t, c.Dir, usageFile)
	got, err := observe.NewReader(l).Observe(c.Path)
	if err != nil {
		t.Fatal(err)
	}
	after, usageAfter := cgrouptest.StatFile(t, c.Dir), cgrouptest.ValueFile(t, c.Dir, usageFile)
	t.Logf("%s: wrote %d (%s): Dirty %d, Writeback %d, Usage %d",
		l.Memory.Version, size, why, got.Dirty, got.Writeback, got.Usage)

	slack := uint64(64 * memcg.PageSize * cpus(t))
	for _, f := range []struct {
		name            string
		got, ref1, ref2 uint64
	}{
		{"Dirty", got.Dirty, before[dirtyKey], after[dirtyKey]},
		{"Writeback", got.Writeback, before[wbKey], after[wbKey]},
		{"Usage", got.Usage, usageBefore, usageAfter},
	} {
		lo, hi := min(f.ref1, f.ref2), max(f.ref1, f.ref2)
		if f.got+slack < lo || f.got > hi+slack {
			t.Errorf("%s = %d, kernel said %d before and %d after (slack %d)", f.name, f.got, f.ref1, f.ref2, slack)
		}
	}
	// The agreement above means something only if the pages are there.
	if got.Dirty+got.Writeback < size/2 || got.Dirty+got.Writeback <= slack {
		t.Errorf("Dirty+Writeback = %d after a %d-byte write without fsync; want most of it, and more than the slack %d",
			got.Dirty+got.Writeback, size, slack)
	}
	if got.Limit != limit {
		t.Errorf("Limit = %d, want %d", got.Limit, limit)
	}
	if _, ok := l.UnifiedDir(c.Path); ok && !got.Pressure.Has {
		t.Errorf("no PSI although the unified cgroup %s exists", c.Path)
	}
}

// keptDirtySize returns how many bytes, at most want, a writer in a cgroup
// with the given limit can leave dirty without the kernel writing them
// back within the test, and why. Writeback starts when a dirty domain
// passes its background threshold (mm/page-writeback.c:
// balance_dirty_pages past freerun, the flusher's wb_over_bg_thresh), and
// writes the inode's dirty pages in chunks of many megabytes, so the pages
// would be clean a few hundred milliseconds later. The machine is always
// such a domain, with the threshold /proc/vmstat shows. On v1 that is all:
// a v1 memory cgroup has no writeback of its own (no cgroup writeback, so
// no mdtc in balance_dirty_pages). On v2 the cgroup is a domain of its
// own, whose dirtyable memory is at most its limit (mdtc_calc_avail), so
// its background threshold is at most dirty_background_ratio of the limit.
// The write is half the smallest threshold, the other half left for other
// dirty pages in the domain. Under vm.dirty_background_bytes the ratio
// reads 0 and the kernel scales the bytes by the cgroup's share of the
// machine's dirtyable memory (domain_dirty_limits), which is not modelled
// here: then only the machine's threshold counts.
func keptDirtySize(t *testing.T, l layout.Layout, limit, want uint64) (uint64, string) {
	t.Helper()
	size, why := want, "all it wanted"
	if bg := cgrouptest.ProcValue(t, "/proc/vmstat", "nr_dirty_background_threshold") * memcg.PageSize; bg/2 < size {
		size, why = bg/2, "half the machine's dirty background threshold"
	}
	if l.Memory.Version == layout.V2 {
		ratio := cgrouptest.ProcValue(t, "/proc/sys/vm/dirty_background_ratio", "")
		if bg := limit / 100 * ratio; ratio != 0 && bg/2 < size {
			size, why = bg/2, fmt.Sprintf("half the cgroup's dirty background threshold, at most %d%% of its limit", ratio)
		}
	}
	return size &^ (memcg.PageSize - 1), why
}

// Observe of the top of the memory hierarchy, the root cgroup on the test
// machines, agrees with the kernel. On v1 the root has usage files of its
// own, and the kernel defines their usage as file + anon of memory.stat
// (mm/memcontrol.c, mem_cgroup_usage); on v2 it has only memory.stat, from
// which Observe takes the same sum. So on both versions Usage must be
// File + Anon, within the batching slack of two counters and the drift of
// the system between the reads, and Limit must be NoLimit.
func TestObserveRootRealKernel(t *testing.T) {
	l := cgrouptest.Layout(t)
	if l.Memory.Root != "/" {
		t.Skipf("the memory hierarchy is mounted from %s, not its root", l.Memory.Root)
	}
	dir := l.Memory.Dir("/")
	fileKey, anonKey := "file", "anon"
	if l.Memory.Version == layout.V1 {
		fileKey, anonKey = "total_cache", "total_rss"
	}
	// The root holds every page of the machine, and its memory.stat is
	// flushed from per-CPU counters lazily (mm/memcontrol.c,
	// mem_cgroup_flush_stats), so a burst of charges elsewhere can put
	// Usage and the stat megabytes apart for a moment: up to
	// rootAttempts observations, a second apart, and one must agree.
	const rootAttempts = 5
	var got memcg.Stat
	for attempt := 1; ; attempt++ {
		var problems []string
		got, problems = observeRoot(t, l, dir, fileKey, anonKey)
		if len(problems) == 0 {
			break
		}
		if attempt == rootAttempts {
			for _, p := range problems {
				t.Error(p)
			}
			break
		}
		t.Logf("attempt %d of %d: %s", attempt, rootAttempts, strings.Join(problems, "; "))
		time.Sleep(time.Second)
	}
	if got.Usage == 0 {
		t.Error("Usage = 0 for the root, which holds every page of the machine")
	}
	if got.Limit != memcg.NoLimit {
		t.Errorf("Limit = %d, want NoLimit: the root has none", got.Limit)
	}
	if l.Memory.Version == layout.V2 && got.Counters.HasEvents {
		t.Error("Counters.HasEvents for the v2 root, which has no memory.events")
	}
}

// observeRoot observes the root once, between two reads of its
// memory.stat, and says what disagrees with the kernel: File and Anon with
// the stat, Usage with their sum.
func observeRoot(t *testing.T, l layout.Layout, dir, fileKey, anonKey string) (memcg.Stat, []string) {
	t.Helper()
	before := cgrouptest.StatFile(t, dir)
	got, err := observe.NewReader(l).Observe("/")
	if err != nil {
		t.Fatal(err)
	}
	after := cgrouptest.StatFile(t, dir)
	t.Logf("%s root: Usage %d, File %d, Anon %d", l.Memory.Version, got.Usage, got.File, got.Anon)

	var problems []string
	slack := uint64(64 * memcg.PageSize * cpus(t))
	drift := uint64(0)
	for _, f := range []struct {
		name            string
		got, ref1, ref2 uint64
	}{
		{"File", got.File, before[fileKey], after[fileKey]},
		{"Anon", got.Anon, before[anonKey], after[anonKey]},
	} {
		lo, hi := min(f.ref1, f.ref2), max(f.ref1, f.ref2)
		drift += hi - lo
		if f.got+slack < lo || f.got > hi+slack {
			problems = append(problems, fmt.Sprintf("%s = %d, kernel said %d before and %d after (slack %d)", f.name, f.got, f.ref1, f.ref2, slack))
		}
	}
	sum := got.File + got.Anon
	if d := max(got.Usage, sum) - min(got.Usage, sum); d > 2*slack+drift {
		problems = append(problems, fmt.Sprintf("Usage = %d, File+Anon = %d: %d apart, want at most %d (slack of two counters %d, drift %d)",
			got.Usage, sum, d, 2*slack+drift, 2*slack, drift))
	}
	return got, problems
}

func cpus(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	// "0-1" or "0,2-3": count the CPUs in each range.
	n := 0
	for _, r := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, ok := strings.Cut(r, "-")
		if !ok {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		z, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil {
			t.Fatalf("/sys/devices/system/cpu/online %q", b)
		}
		n += z - a + 1
	}
	return n
}

func TestObserveVanishedRealKernel(t *testing.T) {
	l := cgrouptest.Layout(t)
	c := cgrouptest.New(t, l, 0).Child(t, "gone")
	r := observe.NewReader(l)
	if _, err := r.Observe(c.Path); err != nil {
		t.Fatalf("before removal: %v", err)
	}
	if err := os.Remove(c.Dir); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Observe(c.Path); !errors.Is(err, host.ErrVanished) {
		t.Errorf("after removal: error %v, want one wrapping host.ErrVanished", err)
	}
}

func BenchmarkObserve(b *testing.B) {
	l := cgrouptest.Layout(b)
	c := cgrouptest.New(b, l, 64<<20)
	cgrouptest.DirtyFile(b, c, filepath.Join(b.TempDir(), "data"), 8<<20)
	r := observe.NewReader(l)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Observe(c.Path); err != nil {
			b.Fatal(err)
		}
	}
}
