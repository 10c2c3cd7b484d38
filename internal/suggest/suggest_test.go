package suggest

import "testing"

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"limit", "limit", 0},
		{"limt", "limit", 1},              // a letter left out
		{"limmit", "limit", 1},            // a letter doubled
		{"limat", "limit", 1},             // a letter wrong
		{"dirty_ratoi", "dirty_ratio", 1}, // two letters swapped
		{"defualts", "defaults", 1},
		{"kitten", "sitting", 3},
		{"ca", "abc", 3}, // optimal string alignment: no edit of a swapped pair
	}
	for _, tt := range tests {
		if got := distance(tt.a, tt.b); got != tt.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := distance(tt.b, tt.a); got != tt.want {
			t.Errorf("distance(%q, %q) = %d, want %d (symmetric)", tt.b, tt.a, got, tt.want)
		}
	}
}

func TestClosest(t *testing.T) {
	knobs := []string{"dirty_ratio", "dirty_bytes", "dirty_background_ratio", "dirty_background_bytes", "min_free_kbytes", "writeback_first"}
	tests := []struct {
		typed string
		names []string
		want  string
	}{
		{"dirty_ratoi", knobs, "dirty_ratio"},
		{"dirty_byte", knobs, "dirty_bytes"},
		{"min_free_kbyte", knobs, "min_free_kbytes"},
		{"writeback_frist", knobs, "writeback_first"},
		{"reclaim_wmarks", knobs, ""}, // nothing near: no guess
		{"dirty_ratio", knobs, ""},    // the name itself: nothing to suggest
		{"limt", []string{"path", "limit", "high", "count", "knobs"}, "limit"},
		{"hihg", []string{"path", "limit", "high", "count", "knobs"}, "high"},
		{"lmt", []string{"limit"}, ""}, // 2 edits in a 3-letter name is a guess too far
		{"bogus", []string{"stock", "first", "memcgd"}, ""},
		{"stokc", []string{"stock", "first", "memcgd"}, "stock"},
		{"ab", []string{"ax", "ay"}, "ax"}, // a tie: the first listed
		{"a", []string{"b"}, ""},           // every letter replaced is no typo
		{"hx", []string{"hz", "ab"}, "hz"},
		{"x", nil, ""},
	}
	for _, tt := range tests {
		if got := Closest(tt.typed, tt.names); got != tt.want {
			t.Errorf("Closest(%q, %v) = %q, want %q", tt.typed, tt.names, got, tt.want)
		}
	}
	if got, want := DidYouMean("limt", []string{"limit"}), `; did you mean "limit"?`; got != want {
		t.Errorf("DidYouMean = %q, want %q", got, want)
	}
	if got := DidYouMean("zzz", []string{"limit"}); got != "" {
		t.Errorf("DidYouMean of nothing close = %q, want \"\"", got)
	}
}
