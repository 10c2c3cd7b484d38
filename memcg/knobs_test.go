package memcg

import (
	"errors"
	"strings"
	"testing"
)

func TestKnobsSet(t *testing.T) {
	tests := []struct {
		name   string
		start  Knobs
		knob   string
		value  string
		want   Knobs
		errHas []string // the error names the knob, the value and what is allowed
	}{
		{
			name:  "dirty_bytes zeroes dirty_ratio, as vm.dirty_bytes does",
			start: DefaultKnobs(), knob: "dirty_bytes", value: "16M",
			want: Knobs{DirtyBytes: 16 << 20, DirtyBackgroundRatio: 10, MinFreeKbytes: MinFreeAuto, WritebackFirst: true},
		},
		{
			name:  "dirty_ratio zeroes dirty_bytes",
			start: Knobs{DirtyBytes: 16 << 20}, knob: "dirty_ratio", value: "15",
			want: Knobs{DirtyRatio: 15},
		},
		{
			name:  "dirty_background_bytes zeroes dirty_background_ratio",
			start: DefaultKnobs(), knob: "dirty_background_bytes", value: "8M",
			want: Knobs{DirtyRatio: 20, DirtyBackgroundBytes: 8 << 20, MinFreeKbytes: MinFreeAuto, WritebackFirst: true},
		},
		{
			name:  "dirty_background_ratio zeroes dirty_background_bytes",
			start: Knobs{DirtyBackgroundBytes: 8 << 20}, knob: "dirty_background_ratio", value: "5",
			want: Knobs{DirtyBackgroundRatio: 5},
		},
		{
			name:  "min_free_kbytes 0 disables background reclaim",
			start: DefaultKnobs(), knob: "min_free_kbytes", value: "0",
			want: Knobs{DirtyRatio: 20, DirtyBackgroundRatio: 10, MinFreeKbytes: 0, WritebackFirst: true},
		},
		{
			name:  "min_free_kbytes back to auto",
			start: Knobs{MinFreeKbytes: 7}, knob: "min_free_kbytes", value: "auto",
			want: Knobs{MinFreeKbytes: MinFreeAuto},
		},
		{
			name:  "writeback_first off",
			start: DefaultKnobs(), knob: "writeback_first", value: "0",
			want: Knobs{DirtyRatio: 20, DirtyBackgroundRatio: 10, MinFreeKbytes: MinFreeAuto},
		},
		{name: "ratio above 100", start: DefaultKnobs(), knob: "dirty_ratio", value: "101",
			errHas: []string{"dirty_ratio", `"101"`, "0 to 100"}},
		{name: "dirty_bytes below dirty_bytes_min (2 pages)", start: DefaultKnobs(), knob: "dirty_bytes", value: "4096",
			errHas: []string{"dirty_bytes", `"4096"`, "at least 8192"}},
		{name: "dirty_background_bytes 0", start: DefaultKnobs(), knob: "dirty_background_bytes", value: "0",
			errHas: []string{"dirty_background_bytes", `"0"`, "at least 1"}},
		{name: "size with a unit memparse does not know", start: DefaultKnobs(), knob: "dirty_bytes", value: "16MiB",
			errHas: []string{"dirty_bytes", `"16MiB"`, "64M"}},
		{name: "min_free_kbytes above the kernel's bound", start: DefaultKnobs(), knob: "min_free_kbytes", value: "262145",
			errHas: []string{"min_free_kbytes", "262144"}},
		{name: "unknown knob", start: DefaultKnobs(), knob: "dirty_limit", value: "1",
			errHas: []string{"dirty_limit", "dirty_ratio, dirty_bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := tt.start
			err := k.Set(tt.knob, tt.value)
			if tt.errHas != nil {
				var ke *KnobError
				if !errors.As(err, &ke) {
					t.Fatalf("Set(%s, %s) error = %v, want a *KnobError", tt.knob, tt.value, err)
				}
				for _, s := range tt.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				if k != tt.start {
					t.Errorf("a failed Set changed the knobs: %+v", k)
				}
				return
			}
			if err != nil {
				t.Fatalf("Set(%s, %s): %v", tt.knob, tt.value, err)
			}
			if k != tt.want {
				t.Errorf("got %+v, want %+v", k, tt.want)
			}
			got, err := k.Get(tt.knob)
			if err != nil {
				t.Fatal(err)
			}
			again := tt.start
			if err := again.Set(tt.knob, got); err != nil || again != k {
				t.Errorf("Get(%s) = %q does not round-trip through Set: %+v, %v", tt.knob, got, again, err)
			}
		})
	}
}

func TestKnobsApplyIsAllOrNothing(t *testing.T) {
	k := DefaultKnobs()
	err := k.Apply(map[string]string{"dirty_bytes": "16M", "min_free_kbytes": "lots"})
	if err == nil || !strings.Contains(err.Error(), "min_free_kbytes") {
		t.Fatalf("Apply error = %v, want one naming min_free_kbytes", err)
	}
	if k != DefaultKnobs() {
		t.Errorf("failed Apply changed knobs: %+v", k)
	}
	err = k.Apply(map[string]string{"dirty_bytes": "16M", "dirty_ratio": "10"})
	if err == nil || !strings.Contains(err.Error(), "only one of dirty_ratio and dirty_bytes") {
		t.Errorf("Apply of both halves of a pair: error = %v", err)
	}
	if err := k.Apply(map[string]string{"dirty_bytes": "16M", "dirty_background_bytes": "8M"}); err != nil {
		t.Fatal(err)
	}
	if k.DirtyBytes != 16<<20 || k.DirtyBackgroundBytes != 8<<20 || k.DirtyRatio != 0 || k.DirtyBackgroundRatio != 0 {
		t.Errorf("Apply = %+v", k)
	}
}
