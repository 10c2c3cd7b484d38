package policy

import (
	"path"
	"time"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// Which cgroups the daemon acts on, and how soon it looks at a new one.

// Manages reports whether the daemon manages the last cgroup of chain
// (its ancestors' readings and its own, root first), which the config
// selected by its path: with limitedOnly, only when the cgroup or an
// ancestor below the root has a memory limit. An unlimited cgroup has no
// dirtyable memory to take a ratio of, and its reclaim is the kernel's.
func Manages(limitedOnly bool, chain []memcg.Stat) bool {
	if !limitedOnly {
		return true
	}
	for _, s := range chain[1:] {
		if s.Limit != memcg.NoLimit {
			return true
		}
	}
	return false
}

// Exempt reports whether cg holds the daemon itself: it is one of self
// (the daemon's cgroups, one per hierarchy it is in: memory, unified, v1
// freezer, as in /proc/self/cgroup) or an ancestor of one. Such a cgroup
// is never throttled, since the daemon would stop itself and never
// resume, nor reclaimed (Input.Exempt). A memory cgroup is throttled
// through the cgroups at the same path in the other hierarchies, so
// comparing paths across hierarchies is what decides it.
func Exempt(cg host.Cgroup, self []host.Cgroup) bool {
	c := path.Clean(string(cg))
	for _, s := range self {
		s := path.Clean(string(s))
		if c == s || c == "/" || len(s) > len(c) && s[:len(c)] == c && s[len(c)] == '/' {
			return true
		}
	}
	return false
}

// BornRelooks are when a cgroup reported created is looked at again after
// its first step: a container runtime writes the new cgroup's limit just
// after its mkdir, so the first step may have found it unlimited, and
// with limited_only unmanaged.
var BornRelooks = [...]time.Duration{50 * time.Millisecond, 250 * time.Millisecond, time.Second}
