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

// An unknown name is an error of its own, apart from a bad value: it
// lists the knobs and suggests the nearest, and Apply reports it before
// any value.
func TestUnknownKnob(t *testing.T) {
	tests := []struct {
		name  string
		apply map[string]string
		want  string
	}{
		{"a typo gets a suggestion", map[string]string{"dirty_ratoi": "10"},
			`unknown knob "dirty_ratoi": allowed dirty_ratio, dirty_bytes, dirty_background_ratio, dirty_background_bytes, min_free_kbytes, writeback_first; did you mean "dirty_ratio"?`},
		{"nothing near: no guess", map[string]string{"reclaim_wmarks": "1"},
			`unknown knob "reclaim_wmarks": allowed dirty_ratio, dirty_bytes, dirty_background_ratio, dirty_background_bytes, min_free_kbytes, writeback_first`},
		{"before a bad value that sorts first", map[string]string{"dirty_bytes": "lots", "writeback_frist": "1"},
			`unknown knob "writeback_frist": allowed dirty_ratio, dirty_bytes, dirty_background_ratio, dirty_background_bytes, min_free_kbytes, writeback_first; did you mean "writeback_first"?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := DefaultKnobs()
			err := k.Apply(tt.apply)
			var ue *UnknownKnobError
			if !errors.As(err, &ue) {
				t.Fatalf("Apply(%v) = %v (%T), want an *UnknownKnobError", tt.apply, err, err)
			}
			var ke *KnobError
			if errors.As(err, &ke) {
				t.Errorf("an unknown knob is also a *KnobError, the error of a bad value")
			}
			if err.Error() != tt.want {
				t.Errorf("error\n %s\nwant\n %s", err, tt.want)
			}
		})
	}
	var k Knobs
	if err := k.Set("dirty_limit", "1"); !errors.As(err, new(*UnknownKnobError)) {
		t.Errorf("Set of an unknown knob = %v, want an *UnknownKnobError", err)
	}
	if _, err := k.Get("dirty_limit"); !errors.As(err, new(*UnknownKnobError)) {
		t.Errorf("Get of an unknown knob = %v, want an *UnknownKnobError", err)
	}
}

// Value gives each knob the JSON type of what it holds.
func TestKnobValue(t *testing.T) {
	tests := []struct {
		name, text string
		want       any
	}{
		{"dirty_ratio", "15", uint64(15)},
		{"dirty_bytes", "16M", uint64(16 << 20)},
		{"dirty_background_ratio", "5", uint64(5)},
		{"dirty_background_bytes", "8K", uint64(8 << 10)},
		{"dirty_bytes", "0", uint64(0)}, // as Get prints it while the ratio is in force
		{"dirty_background_bytes", "0", uint64(0)},
		{"min_free_kbytes", "auto", "auto"},
		{"min_free_kbytes", "2862", uint64(2862)},
		{"min_free_kbytes", "0", uint64(0)},
		{"writeback_first", "0", false},
		{"writeback_first", "true", true},
	}
	for _, tt := range tests {
		got, err := KnobValue(tt.name, tt.text)
		if err != nil || got != tt.want {
			t.Errorf("KnobValue(%s, %s) = %#v, %v; want %#v", tt.name, tt.text, got, err, tt.want)
		}
	}
	if _, err := KnobValue("dirty_ratio", "x"); !errors.As(err, new(*KnobError)) {
		t.Errorf("KnobValue of a bad value = %v, want a *KnobError", err)
	}
	for _, n := range KnobNames() {
		if _, err := DefaultKnobs().Value(n); err != nil {
			t.Errorf("Value(%s): %v", n, err)
		}
	}
}

// The help table and the names Set accepts are one list.
func TestKnobDocsAreTheKnobs(t *testing.T) {
	docs := KnobDocs()
	if len(docs) != len(KnobNames()) {
		t.Fatalf("%d docs for %d knobs", len(docs), len(KnobNames()))
	}
	for i, d := range docs {
		if d.Name != KnobNames()[i] || !IsKnob(d.Name) || d.Values == "" || d.PatchSet == "" {
			t.Errorf("doc %d = %+v, want knob %s with values and patch set", i, d, KnobNames()[i])
		}
	}
}
