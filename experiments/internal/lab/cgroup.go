package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
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
	// when it has none.
	Freezer string

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

// newCgroup creates cg in the memory hierarchy and, with o.Mirror, its
// mirrors. On v2 it first enables the memory and io controllers in the
// parent's cgroup.subtree_control, which the kernel allows as long as the
// parent holds no task (or is the root). On error the returned Cgroup, if
// any, holds what was made, for removal.
func newCgroup(l layout.Layout, cg host.Cgroup, o CgroupOptions) (*Cgroup, error) {
	if l.Memory.Version == layout.V2 {
		parent := l.Memory.Dir(host.Cgroup(path.Dir(string(cg))))
		if err := sandbox.EnableControllers(parent); err != nil {
			return nil, fmt.Errorf("cgroup %s: %w", cg, err)
		}
	}
	sb, err := sandbox.Create(l, cg, sandbox.Options{Limit: o.Limit, Mirror: o.Mirror})
	if sb == nil {
		return nil, err
	}
	c := &Cgroup{Path: sb.Path, Dir: sb.Dir, Unified: sb.Unified, Freezer: sb.Freezer, sb: sb,
		limitFile: sandbox.LimitFile(l.Memory.Version), v2: l.Memory.Version == layout.V2}
	if err != nil {
		return c, err
	}
	lp := filepath.Join(c.Dir, c.limitFile)
	b, err := os.ReadFile(lp)
	if err != nil {
		return c, fmt.Errorf("cgroup %s: %w", cg, err)
	}
	c.limit = strings.TrimSpace(string(b))
	return c, nil
}

// child returns the path of c's child called name, which must be a single
// path element.
func (c *Cgroup) child(name string) (host.Cgroup, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\n") {
		return "", fmt.Errorf("child cgroup name %q: want a single path element", name)
	}
	return host.Cgroup(path.Join(string(c.Path), name)), nil
}

// joinScript moves the shell into each directory's cgroup.procs given
// before "--" and executes the rest of its arguments: the command runs as
// the same process, so its rusage is the command's.
const joinScript = `while [ "$1" != -- ]; do echo $$ > "$1/cgroup.procs" || exit 126; shift; done; shift; exec "$@"`

// Command returns a command that runs name with args inside c (and its
// mirrors), killed when ctx is done. Its stdout and stderr are the
// caller's to set.
func (c *Cgroup) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	sh := append([]string{"-c", joinScript, "sh"}, c.sb.Procs()...)
	sh = append(append(sh, "--", name), args...)
	cmd := exec.CommandContext(ctx, "sh", sh...)
	cmd.WaitDelay = settle
	return cmd
}

// remove thaws the cgroup, kills its tasks and removes its directories,
// and then the directories on the way to its mirrors that nobody uses.
func (c *Cgroup) remove() error { return c.sb.Remove() }
