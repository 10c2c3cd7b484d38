package cgroupfs_test

// The tests of observe.Reader on fake hosts built from format's kernel
// captures live here, in the parent of format, rather than with the Reader
// in observe: they embed the captures (go:embed reaches no parent
// directory, and the test VM ships a package's own testdata only).

import (
	"embed"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/cgroupfs/observe"
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
			got, err := observe.NewReader(tt.layout).Observe(tt.cg)
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
		r := observe.NewReader(l)
		if n := testing.AllocsPerRun(100, func() {
			if _, err := r.Observe("/cg"); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("memory on %s: %v allocations per Observe, want 0", l.Memory.Version, n)
		}
	}
}
