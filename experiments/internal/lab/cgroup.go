package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/internal/sandbox"
)

// settle bounds how long a command's output may outlive it.
const settle = sandbox.Settle

// Cgroup is a memory cgroup the lab created.
type Cgroup struct {
	// Path is the cgroup's path in the memory hierarchy, as in
	// /proc/PID/cgroup.
	Path host.Cgroup
	// Dir is its directory in the memory hierarchy.
	Dir string
	// Unified is the directory with its PSI files and cgroup.freeze: Dir
	// itself on v2, its mirror in the unified hierarchy on v1; "" when it
	// has none.
	Unified string
	// Freezer is its mirror's directory in the v1 freezer hierarchy, ""
	// when it has none; CPU its mirror in the v1 cpu hierarchy, where a
	// pace group of its tasks is made, "" when it has none (and on v2,
	// where Dir has the cpu controller itself).
	Freezer, CPU string

	// limitFile is memory.limit_in_bytes (v1) or memory.max (v2), and
	// limit what it read after creation: what CheckUntouched expects to
	// find after a daemon stopped.
	limitFile, limit string
	// v2 says the memory controller is on cgroup v2.
	v2 bool
	sb *sandbox.Cgroup
}

// CgroupOptions say how to create a cgroup.
type CgroupOptions struct {
	// Limit is memory.limit_in_bytes (v1) or memory.max (v2); 0 leaves
	// the cgroup unlimited.
	Limit uint64
	// Mirror gives the cgroup PSI and a freezer: on a hybrid host it also
	// creates the cgroup at the same path in the unified and freezer
	// hierarchies, where they exist; on v2 the cgroup has both itself.
	// Thousands of idle cgroups need none.
	Mirror bool
}

// options are o as internal/sandbox takes them.
func (o CgroupOptions) options() sandbox.Options {
	return sandbox.Options{Limit: o.Limit, Mirror: o.Mirror}
}

// newCgroup is the lab's view of the cgroup that sandbox made (New,
// Child; on v2 they enable the memory and io controllers in the parent's
// cgroup.subtree_control first) or, with err, began to make, and records
// the limit it reads after creation. On error the returned Cgroup, if
// any, holds what was made, for removal.
func newCgroup(l layout.Layout, sb *sandbox.Cgroup, err error) (*Cgroup, error) {
	if sb == nil {
		return nil, err
	}
	c := &Cgroup{Path: sb.Path, Dir: sb.Dir, Unified: sb.Unified, Freezer: sb.Freezer, CPU: sb.CPU, sb: sb,
		limitFile: sandbox.LimitFile(l.Memory.Version), v2: l.Memory.Version == layout.V2}
	if err != nil {
		return c, err
	}
	b, err := os.ReadFile(filepath.Join(c.Dir, c.limitFile))
	if err != nil {
		return c, fmt.Errorf("cgroup %s: %w", c.Path, err)
	}
	c.limit = strings.TrimSpace(string(b))
	return c, nil
}

// Command returns a command that runs name with args inside c (and its
// mirrors), killed when ctx is done. It runs as the process that joined
// (sandbox.JoinArgv), so its rusage is the command's. Its stdout and
// stderr are the caller's to set.
func (c *Cgroup) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	argv := sandbox.JoinArgv(c.sb.Procs(), 0, append([]string{name}, args...)...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.WaitDelay = settle
	return cmd
}

// remove thaws the cgroup, kills its tasks and removes its directories,
// and then the directories on the way to its mirrors that nobody uses.
func (c *Cgroup) remove() error { return c.sb.Remove() }
