package host

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// ParseCgroup checks that s is a clean hierarchy path, as in
// /proc/PID/cgroup ("/" or "/a/b"), and returns it as a Cgroup. It is the
// one check every input edge uses (the config's manage.under, the
// overrides file, control requests), so that "/a/../b", "a/b", "/a/" or a
// NUL byte never reach a path join under cgroupfs.
//
// Cgroup names are whatever a tenant passed to mkdir(2): any bytes but '/'
// and NUL, not necessarily UTF-8. ParseCgroup accepts such names; the
// places that need valid UTF-8 (JSON, Prometheus labels) escape them.
func ParseCgroup(s string) (Cgroup, error) {
	if !strings.HasPrefix(s, "/") || path.Clean(s) != s || strings.IndexByte(s, 0) >= 0 {
		return "", fmt.Errorf("cgroup: invalid value %q: allowed a clean hierarchy path starting with /, as in /proc/PID/cgroup", s)
	}
	return Cgroup(s), nil
}

// Valid reports whether the name is valid UTF-8, which Prometheus labels and
// JSON strings need.
func (cg Cgroup) Valid() bool { return utf8.ValidString(string(cg)) }

// Ancestors returns cg's path and its ancestors', root first: "/a/b" gives
// "/", "/a", "/a/b".
func Ancestors(cg Cgroup) []Cgroup {
	n := 1
	if cg != "/" {
		n += strings.Count(string(cg), "/")
	}
	out := make([]Cgroup, n)
	p := string(cg)
	for i := n - 1; i >= 0; i-- {
		out[i] = Cgroup(p)
		p = path.Dir(p)
	}
	return out
}
