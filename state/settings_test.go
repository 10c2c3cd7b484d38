package state

import (
	"maps"
	"testing"

	"github.com/memcgd/memcgd/memcg"
)

func TestNewSettings(t *testing.T) {
	e := memcg.Effective{
		Knobs:      memcg.Knobs{DirtyBytes: 16 << 20, DirtyBackgroundRatio: 5, MinFreeKbytes: memcg.MinFreeAuto, WritebackFirst: true},
		Dirty:      memcg.DirtyLimits{Background: 1 << 20, Limit: 16 << 20},
		Watermarks: memcg.Watermarks{Min: 1, Low: 2, High: 3},
	}
	s := NewSettings("/a", e, map[string]string{"dirty_bytes": "16777216"})
	want := map[string]string{
		"dirty_ratio": "0", "dirty_bytes": "16777216", "dirty_background_ratio": "5",
		"dirty_background_bytes": "0", "min_free_kbytes": "auto", "writeback_first": "true",
	}
	if !maps.Equal(s.Knobs, want) {
		t.Errorf("Knobs = %v, want every knob %v", s.Knobs, want)
	}
	if s.Cgroup != "/a" || s.Dirty != e.Dirty || s.Watermarks != e.Watermarks || s.Overrides["dirty_bytes"] != "16777216" {
		t.Errorf("NewSettings = %+v", s)
	}
	if none := NewSettings("/b", e, nil); none.Overrides == nil {
		t.Error("NewSettings with no overrides: Overrides is nil, want empty")
	}
}
