package host

import (
	"slices"
	"strings"
	"testing"
)

func TestParseCgroup(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"/", true},
		{"/a", true},
		{"/a/b.slice", true},
		{"/caf\xe9", true}, // not UTF-8, but a name mkdir accepts
		{"", false},
		{"a", false},
		{"/a/", false},
		{"/a//b", false},
		{"/a/../b", false},
		{"/./a", false},
		{"/a\x00b", false},
	}
	for _, tt := range tests {
		cg, err := ParseCgroup(tt.in)
		if tt.ok != (err == nil) {
			t.Errorf("ParseCgroup(%q) = %q, %v; want ok=%v", tt.in, cg, err, tt.ok)
			continue
		}
		if err != nil && (!strings.Contains(err.Error(), "cgroup: invalid value") || !strings.Contains(err.Error(), "allowed a clean hierarchy path")) {
			t.Errorf("ParseCgroup(%q) error %q: want the field, the value and what is allowed", tt.in, err)
		}
		if err == nil && string(cg) != tt.in {
			t.Errorf("ParseCgroup(%q) = %q", tt.in, cg)
		}
	}
}

func TestAncestors(t *testing.T) {
	tests := []struct {
		cg   Cgroup
		want []Cgroup
	}{
		{"/", []Cgroup{"/"}},
		{"/a", []Cgroup{"/", "/a"}},
		{"/a/b/c", []Cgroup{"/", "/a", "/a/b", "/a/b/c"}},
	}
	for _, tt := range tests {
		if got := Ancestors(tt.cg); !slices.Equal(got, tt.want) {
			t.Errorf("Ancestors(%q) = %q, want %q", tt.cg, got, tt.want)
		}
	}
}
