package memcg

import (
	"maps"
	"testing"
)

func TestPatch(t *testing.T) {
	tests := []struct {
		name    string
		base    Knobs
		pairs   map[string]string
		want    Knobs
		wantErr bool
	}{
		{name: "bytes zeroes the ratio twin", base: DefaultKnobs(),
			pairs: map[string]string{"dirty_bytes": "16M"},
			want:  Knobs{DirtyBytes: 16 << 20, DirtyBackgroundRatio: 10, MinFreeKbytes: MinFreeAuto, WritebackFirst: true}},
		{name: "ratio zeroes the bytes twin", base: Knobs{DirtyBytes: 1 << 20, DirtyBackgroundBytes: 4096},
			pairs: map[string]string{"dirty_ratio": "7", "dirty_background_ratio": "3", "writeback_first": "1", "min_free_kbytes": "0"},
			want:  Knobs{DirtyRatio: 7, DirtyBackgroundRatio: 3, WritebackFirst: true}},
		{name: "empty patch changes nothing", base: DefaultKnobs(), pairs: map[string]string{}, want: DefaultKnobs()},
		{name: "both halves refused", pairs: map[string]string{"dirty_bytes": "1M", "dirty_ratio": "5"}, wantErr: true},
		{name: "bad value refused", pairs: map[string]string{"dirty_ratio": "101"}, wantErr: true},
		{name: "unknown knob refused", pairs: map[string]string{"dirty": "1"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePatch(tt.pairs)
			if tt.wantErr != (err != nil) {
				t.Fatalf("ParsePatch(%v) error %v, want error %v", tt.pairs, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if got := p.Apply(tt.base); got != tt.want {
				t.Errorf("Apply = %+v, want %+v", got, tt.want)
			}
			// Knobs.Apply is the reference.
			ref := tt.base
			if err := ref.Apply(tt.pairs); err != nil || ref != tt.want {
				t.Errorf("Knobs.Apply = %+v, %v; the reference disagrees", ref, err)
			}
		})
	}
}

func TestPatchMerge(t *testing.T) {
	parse := func(m map[string]string) Patch {
		p, err := ParsePatch(m)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		old, next, want map[string]string
	}{
		{map[string]string{"dirty_ratio": "5"}, map[string]string{"dirty_bytes": "16M"}, map[string]string{"dirty_bytes": "16777216"}},
		{map[string]string{"dirty_bytes": "16M", "min_free_kbytes": "128"}, map[string]string{"dirty_background_bytes": "8M"},
			map[string]string{"dirty_bytes": "16777216", "dirty_background_bytes": "8388608", "min_free_kbytes": "128"}},
		{map[string]string{"writeback_first": "false"}, map[string]string{"writeback_first": "true"}, map[string]string{"writeback_first": "true"}},
	}
	for _, tt := range tests {
		got := parse(tt.old).Merge(parse(tt.next)).Strings()
		if !maps.Equal(got, tt.want) {
			t.Errorf("%v merged with %v = %v, want %v", tt.old, tt.next, got, tt.want)
		}
	}
}
