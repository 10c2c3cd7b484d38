package cgroupfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// formatFixture reads a file of the format package's kernel captures.
func formatFixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("format", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fixtureLayouts builds fake hosts from the captured files: a hybrid one
// (memory on v1, unified mirror at /cg only) and a v2 one.
func fixtureLayouts(t testing.TB) (hybrid, v2 cgroupfs.Layout) {
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
	root := fakeHost(t.(*testing.T), v1Files)
	hybrid = cgroupfs.Layout{
		Memory:  cgroupfs.Hierarchy{Version: cgroupfs.V1, Mount: filepath.Join(root, "memory"), Root: "/"},
		Unified: &cgroupfs.Hierarchy{Version: cgroupfs.V2, Mount: filepath.Join(root, "unified"), Root: "/"},
	}

	v2Files := map[string]string{}
	for _, f := range []string{"memory.stat", "memory.current", "memory.max", "memory.high", "memory.events", "memory.pressure"} {
		v2Files["cg/"+f] = formatFixture(t, "v2/"+f)
	}
	// The root has no memory.current, memory.max, memory.high or memory.events.
	v2Files["memory.stat"] = formatFixture(t, "v2/memory.stat")
	v2Files["memory.pressure"] = formatFixture(t, "v2/proc_pressure_memory")
	root = fakeHost(t.(*testing.T), v2Files)
	v2 = cgroupfs.Layout{Memory: cgroupfs.Hierarchy{Version: cgroupfs.V2, Mount: root, Root: "/"}}
	v2.Unified = &v2.Memory
	return hybrid, v2
}

func TestObserveFixtures(t *testing.T) {
	hybrid, v2 := fixtureLayouts(t)
	tests := []struct {
		name    string
		layout  cgroupfs.Layout
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
		name:   "v2 root: no usage or limit files, so no limit",
		layout: v2,
		cg:     "/",
		want: memcg.Stat{
			Limit: memcg.NoLimit, Max: memcg.NoLimit, High: memcg.NoLimit,
			File: 63488000, InactiveFile: 63488000, Anon: 106496, Dirty: 8744960,
			Counters: memcg.Counters{HasReclaim: true, PgscanDirect: 17270, PgstealDirect: 17270},
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
	for _, l := range []cgroupfs.Layout{hybrid, v2} {
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
// limit and a writer that has dirtied 32 MiB and sleeps holding its file.
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
	c := cgrouptest.New(t, l, limit)
	cgrouptest.StartWriter(t, c, filepath.Join(t.TempDir(), "data"), 32<<20)

	dirtyKey, wbKey, usageFile := "file_dirty", "file_writeback", "memory.current"
	if l.Memory.Version == cgroupfs.V1 {
		dirtyKey, wbKey, usageFile = "total_dirty", "total_writeback", "memory.usage_in_bytes"
	}
	before, usageBefore := statFile(t, c.Dir), valueFile(t, c.Dir, usageFile)
	got, err := cgroupfs.NewReader(l).Observe(c.Path)
	if err != nil {
		t.Fatal(err)
	}
	after, usageAfter := statFile(t, c.Dir), valueFile(t, c.Dir, usageFile)

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
	if got.Dirty+got.Writeback < 16<<20 {
		t.Errorf("Dirty+Writeback = %d after a 32 MiB write without fsync; want most of it", got.Dirty+got.Writeback)
	}
	if got.Limit != limit {
		t.Errorf("Limit = %d, want %d", got.Limit, limit)
	}
	if _, ok := l.UnifiedDir(c.Path); ok && !got.Pressure.Has {
		t.Errorf("no PSI although the unified cgroup %s exists", c.Path)
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
