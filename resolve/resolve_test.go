package resolve

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/overrides"
)

func TestKnobs(t *testing.T) {
	cfg, err := config.Parse([]byte("version: 1\ndefaults: {dirty_ratio: 10}\nrules:\n  - match: /k/**\n    set: {dirty_background_bytes: 8M}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ov, err := overrides.Load(filepath.Join(t.TempDir(), "o.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ov.Set("/k/a", map[string]string{"dirty_bytes": "16M"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		cg   host.Cgroup
		ov   *overrides.Overrides
		want memcg.Knobs
	}{
		{"/x", ov, memcg.Knobs{DirtyRatio: 10, DirtyBackgroundRatio: 10, MinFreeKbytes: memcg.MinFreeAuto, WritebackFirst: true}},
		{"/k/b", ov, memcg.Knobs{DirtyRatio: 10, DirtyBackgroundBytes: 8 << 20, MinFreeKbytes: memcg.MinFreeAuto, WritebackFirst: true}},
		{"/k/a", ov, memcg.Knobs{DirtyBytes: 16 << 20, DirtyBackgroundBytes: 8 << 20, MinFreeKbytes: memcg.MinFreeAuto, WritebackFirst: true}},
		{"/k/a", nil, memcg.Knobs{DirtyRatio: 10, DirtyBackgroundBytes: 8 << 20, MinFreeKbytes: memcg.MinFreeAuto, WritebackFirst: true}},
	}
	for _, tt := range tests {
		if got := Knobs(cfg, tt.ov, tt.cg); got != tt.want {
			t.Errorf("Knobs(%s, overrides %v) = %+v, want %+v", tt.cg, tt.ov != nil, got, tt.want)
		}
	}
}

func TestResolveTakesTheSmallestThresholdOfTheChain(t *testing.T) {
	stats := map[host.Cgroup]memcg.Stat{
		"/":    {Limit: memcg.NoLimit, Max: memcg.NoLimit, High: memcg.NoLimit, Usage: 1 << 30, File: 1 << 30},
		"/a":   {Limit: 1 << 30, Max: 1 << 30, High: memcg.NoLimit, Usage: 512 << 20, File: 256 << 20},
		"/a/b": {Limit: memcg.NoLimit, Max: memcg.NoLimit, High: memcg.NoLimit, Usage: 100 << 20, File: 100 << 20},
	}
	observe := func(_ context.Context, cg host.Cgroup) (memcg.Stat, error) { return stats[cg], nil }
	knobs := func(cg host.Cgroup) memcg.Knobs {
		k := memcg.DefaultKnobs()
		if cg == "/a" {
			k.DirtyRatio, k.DirtyBytes = 0, 4<<20
		}
		return k
	}
	s, e, err := Resolve(context.Background(), "/a/b", observe, knobs)
	if err != nil {
		t.Fatal(err)
	}
	if s != stats["/a/b"] {
		t.Errorf("stat = %+v, want /a/b's", s)
	}
	want := memcg.Resolve([]memcg.Stat{stats["/"], stats["/a"], stats["/a/b"]}, []memcg.Knobs{knobs("/"), knobs("/a"), knobs("/a/b")})
	if e != want {
		t.Errorf("effective = %+v, want %+v", e, want)
	}
	if e.Dirty.Limit > 4<<20 {
		t.Errorf("dirty limit %d above the parent's dirty_bytes 4M", e.Dirty.Limit)
	}
}

// Over a depth-first walk, PathCache reads each cgroup once.
func TestPathCacheReadsEachCgroupOnce(t *testing.T) {
	walk := []host.Cgroup{"/", "/a", "/a/x", "/a/x/1", "/a/y", "/b", "/b/z", "/bb"}
	reads := map[host.Cgroup]int{}
	c := NewPathCache(func(_ context.Context, cg host.Cgroup) (memcg.Stat, error) {
		reads[cg]++
		return memcg.Stat{Usage: uint64(len(cg))}, nil
	})
	for _, cg := range walk {
		for _, p := range host.Ancestors(cg) {
			s, err := c.Observe(context.Background(), p)
			if err != nil || s.Usage != uint64(len(p)) {
				t.Fatalf("Observe(%s) = %v, %v", p, s, err)
			}
		}
		if len(c.path) > len(host.Ancestors(cg)) {
			t.Errorf("after %s the cache holds %d readings", cg, len(c.path))
		}
	}
	for _, cg := range walk {
		if reads[cg] != 1 {
			t.Errorf("%s read %d times, want once", cg, reads[cg])
		}
	}
	if len(reads) != len(walk) {
		t.Errorf("read %d cgroups, want the %d walked", len(reads), len(walk))
	}
}
