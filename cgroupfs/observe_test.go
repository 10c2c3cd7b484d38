package cgroupfs_test

import (
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// formatTestdata holds the format package's kernel captures. They are
// embedded, not read from the source tree, because the test VM ships a
// package's own testdata only (test/vm, TestJob).
//
//go:embed format/testdata/v1 format/testdata/v2 format/testdata/unified
var formatTestdata embed.FS

// formatFixture reads a file of the format package's kernel captures.
func formatFixture(t testing.TB, name string) string {
	t.Helper()
	b, err := formatTestdata.ReadFile("format/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fixtureLayouts builds fake hosts from the captured files: a hybrid one
// (memory on v1, unified mirror at /cg only) and a v2 one.
func fixtureLayouts(t testing.TB) (hybrid, v2 layout.Layout) {
	v1Files := map[string]string{}
	for _, f := range []string{"memory.stat", "memory.usage_in_bytes", "memory.limit_in_bytes", "memory.failcnt"} {
		v1Files["memory/cg/"+f] = formatFixture(t, "v1/"+f)
		v1Files["memory/nomirror/"+f] = formatFixture(t, "v1/"+f)
	}
	v1Files["unified/cg/memory.pressure"] = formatFixture(t, "unified/memory.pressure")
	v1Files["memory/bad/memory.stat"] = "cache 1\ndirty lots\n"
	for _, f := range []string{"memory.usage_in_bytes", "memory.limit_in_bytes", "memory.failcnt"} {
		v1Files["memory/bad/"+f] = formatFixture(t, "v1/"+f)
	}
	root := cgrouptest.FakeHost(t, v1Files)
	hybrid = layout.Layout{
		Memory:  layout.Hierarchy{Version: layout.V1, Mount: filepath.Join(root, "memory"), Root: "/"},
		Unified: &layout.Hierarchy{Version: layout.V2, Mount: filepath.Join(root, "unified"), Root: "/"},
	}

	v2Files := map[string]string{}
	for _, f := range []string{"memory.stat", "memory.current", "memory.max", "memory.high", "memory.events", "memory.pressure"} {
		v2Files["cg/"+f] = formatFixture(t, "v2/"+f)
	}
	// The root has no memory.current, memory.max, memory.high or
	// memory.events; its memory.pressure is the system's
	// (kernel/sched/psi.c: the root cgroup's group is psi_system).
	v2Files["memory.stat"] = formatFixture(t, "v2/root/memory.stat")
	v2Files["memory.pressure"] = formatFixture(t, "v2/proc_pressure_memory")
	root = cgrouptest.FakeHost(t, v2Files)
	v2 = layout.Layout{Memory: layout.Hierarchy{Version: layout.V2, Mount: root, Root: "/"}}
	v2.Unified = &v2.Memory
	return hybrid, v2
}

func TestObserveFixtures(t *testing.T) {
	hybrid, v2 := fixtureLayouts(t)
	// A kernel older than the root's memory.stat shows only PSI there.
	oldRoot := cgrouptest.FakeHost(t, map[string]string{"memory.pressure": formatFixture(t, "v2/proc_pressure_memory")})
	oldV2 := layout.Layout{Memory: layout.Hierarchy{Version: layout.V2, Mount: oldRoot, Root: "/"}}
	tests := []struct {
		name    string
		layout  layout.Layout
		cg      host.Cgroup
		want    memcg.Stat
		wantErr string
		vanish  bool
	}{{
		name:   "v1 with a unified mirror: total_* figures, failcnt, the mirror's PSI",
		layout: hybrid,
		cg:     "/cg",
		want: memcg.Stat{
			Usage: 65933312, Limit: 64 << 20, Max: 64 << 20, High: memcg.NoLimit,
			File: 33554432, InactiveFile: 33554432, Dirty: 33554432,
			Counters: memcg.Counters{HasPgpg: true, Pgpgin: 319, Pgpgout: 287, HasFailcnt: true, Failcnt: 35},
			Pressure: memcg.Pressure{Has: true, SomeTotal: 5587, FullTotal: 4344},
		},
	}, {
		name:   "v1 without a unified mirror has no PSI",
		layout: hybrid,
		cg:     "/nomirror",
		want: memcg.Stat{
			Usage: 65933312, Limit: 64 << 20, Max: 64 << 20, High: memcg.NoLimit,
			File: 33554432, InactiveFile: 33554432, Dirty: 33554432,
			Counters: memcg.Counters{HasPgpg: true, Pgpgin: 319, Pgpgout: 287, HasFailcnt: true, Failcnt: 35},
		},
	}, {
		name:   "v2: the limit is min(max, high); reclaim counters, events and PSI",
		layout: v2,
		cg:     "/cg",
		want: memcg.Stat{
			Usage: 66150400, Limit: 64 << 20, Max: 64 << 20, High: memcg.NoLimit,
			File: 63488000, InactiveFile: 63488000, Anon: 106496, Dirty: 8744960,
			Counters: memcg.Counters{
				HasReclaim: true, PgscanDirect: 17270, PgstealDirect: 17270,
				HasEvents: true, EventsMax: 314,
			},
			Pressure: memcg.Pressure{Has: true, SomeTotal: 165023, FullTotal: 165023, SomeAvg10: 0.54},
		},
	}, {
		name:   "v2 root: no limit, no events, usage is anon + file as v1 defines the root's",
		layout: v2,
		cg:     "/",
		want: memcg.Stat{
			Usage: 176128 + 38404096,
			Limit: memcg.NoLimit, Max: memcg.NoLimit, High: memcg.NoLimit,
			File: 38404096, ActiveFile: 28672, InactiveFile: 33603584, Anon: 176128,
			Dirty: 5648384, Writeback: 7348224,
			Counters: memcg.Counters{HasReclaim: true},
			Pressure: memcg.Pressure{Has: true, SomeTotal: 107509, FullTotal: 106341, SomeAvg10: 0.54},
		},
	}, {
		name:   "v2 root without memory.stat: no figures but PSI",
		layout: oldV2,
		cg:     "/",
		want: memcg.Stat{
			Limit: memcg.NoLimit, Max: memcg.NoLimit, High: memcg.NoLimit,
			Pressure: memcg.Pressure{Has: true, SomeTotal: 107509, FullTotal: 106341, SomeAvg10: 0.54},
		},
	}, {
		name:   "a removed cgroup has vanished",
		layout: hybrid,
		cg:     "/gone",
		vanish: true,
	}, {
		name:   "a removed v2 cgroup has vanished",
		layout: v2,
		cg:     "/gone",
		vanish: true,
	}, {
		name:    "a malformed memory.stat names the file and the line",
		layout:  hybrid,
		cg:      "/bad",
		wantErr: `observe /bad: ` + hybrid.Memory.Mount + `/bad/memory.stat: memory.stat line 2 "dirty lots"`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cgroupfs.NewReader(tt.layout).Observe(tt.cg)
			switch {
			case tt.vanish:
				if !errors.Is(err, host.ErrVanished) {
					t.Fatalf("error %v, want one wrapping host.ErrVanished", err)
				}
				return
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestObserveAllocatesNothing(t *testing.T) {
	hybrid, v2 := fixtureLayouts(t)
	for _, l := range []layout.Layout{hybrid, v2} {
		r := cgroupfs.NewReader(l)
		if n := testing.AllocsPerRun(100, func() {
			if _, err := r.Observe("/cg"); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("memory on %s: %v allocations per Observe, want 0", l.Memory.Version, n)
		}
	}
}

// statFile reads the named keys of a cgroup's memory.stat, and a
// single-value file, as a reference independent of package format.
func statFile(t *testing.T, dir string) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]uint64{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, " ")
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			m[k] = n
		}
	}
	return m
}

func valueFile(t *testing.T, dir, name string) uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

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
	before, usageBefore := statFile(t, c.Dir), valueFile(t, c.Dir, usageFile)
	got, err := cgroupfs.NewReader(l).Observe(c.Path)
	if err != nil {
		t.Fatal(err)
	}
	after, usageAfter := statFile(t, c.Dir), valueFile(t, c.Dir, usageFile)
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
	if bg := procValue(t, "/proc/vmstat", "nr_dirty_background_threshold") * memcg.PageSize; bg/2 < size {
		size, why = bg/2, "half the machine's dirty background threshold"
	}
	if l.Memory.Version == layout.V2 {
		ratio := procValue(t, "/proc/sys/vm/dirty_background_ratio", "")
		if bg := limit / 100 * ratio; ratio != 0 && bg/2 < size {
			size, why = bg/2, fmt.Sprintf("half the cgroup's dirty background threshold, at most %d%% of its limit", ratio)
		}
	}
	return size &^ (memcg.PageSize - 1), why
}

// procValue reads a number from a procfs file: the value of key in a
// "key value" file such as /proc/vmstat, or the whole file if key is "".
func procValue(t *testing.T, file, key string) uint64 {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(b))
	if key != "" {
		v = ""
		for _, line := range strings.Split(string(b), "\n") {
			if k, rest, ok := strings.Cut(line, " "); ok && k == key {
				v = rest
			}
		}
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("%s %s: %q is not a number", file, key, v)
	}
	return n
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
	before := statFile(t, dir)
	got, err := cgroupfs.NewReader(l).Observe("/")
	if err != nil {
		t.Fatal(err)
	}
	after := statFile(t, dir)
	t.Logf("%s root: Usage %d, File %d, Anon %d", l.Memory.Version, got.Usage, got.File, got.Anon)

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
			t.Errorf("%s = %d, kernel said %d before and %d after (slack %d)", f.name, f.got, f.ref1, f.ref2, slack)
		}
	}
	sum := got.File + got.Anon
	if d := max(got.Usage, sum) - min(got.Usage, sum); d > 2*slack+drift {
		t.Errorf("Usage = %d, File+Anon = %d: %d apart, want at most %d (slack of two counters %d, drift %d)",
			got.Usage, sum, d, 2*slack+drift, 2*slack, drift)
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
	r := cgroupfs.NewReader(l)
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
	r := cgroupfs.NewReader(l)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Observe(c.Path); err != nil {
			b.Fatal(err)
		}
	}
}
