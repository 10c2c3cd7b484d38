package cgroupfs

import (
	"path"
	"path/filepath"
	"strings"

	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/journal"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
)

// A v2 pace group (act.Pacer, journal.PaceGroupName) is a child of the
// tenant's leaf in the one hierarchy, so the memory subtree's listing and
// its mkdir and rmdir events find it. It is memcgd's, and threaded: it has
// no memory controller of its own (its tasks are charged to the threaded
// domain above it, kernel/cgroup/cgroup.c cgroup_type_write), so a step of
// it would find no memory.stat and take it for a cgroup gone. FS leaves it
// out of both.

// paceGroupEvent reports whether a mkdir or rmdir event is of a cgroup
// named as a pace group. The name alone decides, as a pace group is made
// threaded only after its mkdir: a tenant's cgroup of that name is found
// by the next listing instead (paceGroup).
func paceGroupEvent(cg host.Cgroup) bool {
	return path.Base(string(cg)) == journal.PaceGroupName
}

// paceGroup reports whether cg is a threaded cgroup named as a pace group
// in h: memcgd's own. On v1 the pace groups are in the cpu hierarchy, not
// h.
func paceGroup(h layout.Hierarchy, cg host.Cgroup) bool {
	if h.Version != layout.V2 || path.Base(string(cg)) != journal.PaceGroupName {
		return false
	}
	b, err := ctlfile.Read(filepath.Join(h.Dir(cg), "cgroup.type"))
	return err == nil && strings.TrimSpace(b) == "threaded"
}

// WalkCgroups calls fn with each memory cgroup beneath (and including)
// the managed subtree as the walk finds it, parents first
// (layout.WalkFunc), memcgd's own pace groups left out.
func (fs *FS) WalkCgroups(fn func(host.Cgroup) error) error {
	return layout.WalkFunc(fs.layout.Memory, fs.under, func(cg host.Cgroup) error {
		if paceGroup(fs.layout.Memory, cg) {
			return nil
		}
		return fn(cg)
	})
}
