package agent

import (
	"path"

	"github.com/memcgd/memcgd/host"
)

// HoldsMemcgd is the Status.Exempt of a cgroup whose subtree holds the
// daemon itself.
const HoldsMemcgd = "not throttled: holds memcgd"

// holdsSelf reports whether cg is one of the daemon's own cgroups or an
// ancestor of one: its subtree holds the daemon. self has one path per
// hierarchy the daemon is in (memory, unified, v1 freezer). A memory cgroup
// is paused through the unified or freezer cgroup at the same path
// (cgroupfs.Pause), so comparing paths across hierarchies is what decides
// whether a pause would stop the daemon.
func holdsSelf(cg host.Cgroup, self []host.Cgroup) bool {
	c := path.Clean(string(cg))
	for _, s := range self {
		s := path.Clean(string(s))
		if c == s || c == "/" || len(s) > len(c) && s[:len(c)] == c && s[len(c)] == '/' {
			return true
		}
	}
	return false
}
