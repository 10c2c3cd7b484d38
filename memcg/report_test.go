package memcg

import "testing"

// Every printer shows a field alike: text as memcgd stat prints it, JSON
// as its --json and the control socket carry it.
func TestFieldText(t *testing.T) {
	tests := []struct {
		f    Field
		text string
		json any
	}{
		{Field{"usage", 4096, true, KindBytes}, "4096", uint64(4096)},
		{Field{"limit", NoLimit, true, KindBytes}, "max", nil},
		{Field{"limit", 0, true, KindBytes}, "0", uint64(0)},
		{Field{"pgrefill", 7, true, KindNumber}, "7", uint64(7)},
		{Field{"pgrefill", NoLimit, true, KindNumber}, "18446744073709551615", uint64(NoLimit)}, // a count is never "no limit"
		{Field{"pgpgin", 0, false, KindNumber}, "n/a", nil},
		{Field{"writeback_first", 1, true, KindFlag}, "true", true},
		{Field{"writeback_first", 0, true, KindFlag}, "false", false},
		{Field{"dirty_tracker", 0, false, KindFlag}, "n/a", nil},
	}
	for _, tt := range tests {
		if got := tt.f.Text(); got != tt.text {
			t.Errorf("%+v: Text = %q, want %q", tt.f, got, tt.text)
		}
		if got := tt.f.JSON(); got != tt.json {
			t.Errorf("%+v: JSON = %#v, want %#v", tt.f, got, tt.json)
		}
	}
}

// writeback_first is a flag in memcgd stat, as it is true or false in
// memcgd get and set.
func TestReportKinds(t *testing.T) {
	k := DefaultKnobs()
	for _, f := range Report(Stat{Limit: NoLimit}, Effective{Knobs: k}) {
		want := KindNumber
		switch f.Name {
		case "writeback_first":
			want = KindFlag
		case "usage", "limit", "file", "anon", "dirty", "writeback", "dirty_bytes", "dirty_background_bytes",
			"dirty_background_thresh", "dirty_thresh", "low_wmark", "high_wmark":
			want = KindBytes
		}
		if f.Kind != want {
			t.Errorf("%s: kind %d, want %d", f.Name, f.Kind, want)
		}
		if f.Name == "writeback_first" && f.Text() != "true" {
			t.Errorf("writeback_first prints %q, want true as memcgd get prints it", f.Text())
		}
		if f.Name == "limit" && f.JSON() != nil {
			t.Errorf("an unlimited limit is %#v in JSON, want null", f.JSON())
		}
	}
}
