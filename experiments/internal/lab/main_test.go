package lab

import "testing"

func TestShellQuoteQuotesOnlyWhatAShellWouldSplit(t *testing.T) {
	tests := []struct{ in, want string }{
		{"-runs", "-runs"},
		{"2G", "2G"},
		{"/var/tmp", "/var/tmp"},
		{"dirty_ratio: 10, min_free_kbytes: auto", "'dirty_ratio: 10, min_free_kbytes: auto'"},
		{"it's", `'it'\''s'`},
		{"", "''"},
	}
	for _, tt := range tests {
		if got := shellQuote(tt.in); got != tt.want {
			t.Errorf("shellQuote(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
