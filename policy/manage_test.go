package policy

import (
	"testing"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

func TestManages(t *testing.T) {
	const never = memcg.NoLimit
	root := memcg.Stat{Limit: never}
	tests := []struct {
		name        string
		limitedOnly bool
		chain       []memcg.Stat
		want        bool
	}{
		{"limited_only: a cgroup with a limit of its own is managed", true, []memcg.Stat{root, {Limit: 1 << 30}}, true},
		{"limited_only: one under a limited ancestor is managed", true, []memcg.Stat{root, {Limit: 1 << 30}, {Limit: never}}, true},
		{"limited_only: one with no limit on it or below the root is not", true, []memcg.Stat{root, {Limit: never}, {Limit: never}}, false},
		{"limited_only: the root's own limit does not count (it has none in cgroupfs)", true, []memcg.Stat{{Limit: 1 << 30}, {Limit: never}}, false},
		{"limited_only: the root itself is not managed", true, []memcg.Stat{root}, false},
		{"limited_only off: every cgroup of the subtree is managed", false, []memcg.Stat{root, {Limit: never}}, true},
	}
	for _, tt := range tests {
		if got := Manages(tt.limitedOnly, tt.chain); got != tt.want {
			t.Errorf("%s: Manages = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestExempt(t *testing.T) {
	tests := []struct {
		cg   host.Cgroup
		self []host.Cgroup
		want bool
	}{
		{"/a", nil, false},
		{"/", nil, false},
		{"/", []host.Cgroup{"/"}, true},
		{"/", []host.Cgroup{"/a"}, true},
		{"/a", []host.Cgroup{"/a"}, true},
		{"/a", []host.Cgroup{"/a/b/c"}, true},
		{"/a/b/c", []host.Cgroup{"/a"}, false},
		{"/a", []host.Cgroup{"/ab"}, false},
		{"/ab", []host.Cgroup{"/a"}, false},
		{"/a", []host.Cgroup{"/x", "/a/"}, true},
	}
	for _, tt := range tests {
		if got := Exempt(tt.cg, tt.self); got != tt.want {
			t.Errorf("Exempt(%s, %v) = %v, want %v", tt.cg, tt.self, got, tt.want)
		}
	}
}
