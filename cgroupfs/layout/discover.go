package layout

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/memcgd/memcgd/cgroupfs/format"
	"github.com/memcgd/memcgd/host"
)

// Version is a cgroup hierarchy's version.
type Version int

// The two cgroup versions: v1's per-controller hierarchies and v2's unified
// one.
const (
	V1 Version = 1
	V2 Version = 2
)

// String returns "v1" or "v2".
func (v Version) String() string { return fmt.Sprintf("v%d", int(v)) }

// Hierarchy is one mounted cgroup hierarchy.
type Hierarchy struct {
	// Version is V2 for a cgroup2 mount, V1 otherwise.
	Version Version
	// Mount is the mount point, such as /sys/fs/cgroup/memory.
	Mount string
	// Root is the cgroup the mount shows, usually "/"; a container without
	// a cgroup namespace may see only its own subtree mounted.
	Root string
}

// Dir returns the cgroupfs directory of cg. A cgroup outside the mounted
// subtree has no directory: Dir returns "", which no file operation opens.
func (h Hierarchy) Dir(cg host.Cgroup) string {
	rel, ok := Within(h.Root, string(cg))
	if !ok {
		return ""
	}
	return filepath.Join(h.Mount, filepath.FromSlash(rel))
}

// Cgroup returns the cgroup whose directory is dir, the inverse of Dir.
func (h Hierarchy) Cgroup(dir string) (host.Cgroup, error) {
	if aboveRoot(h.Root) {
		return "", fmt.Errorf("directory %s: the cgroup %s mount %s shows cgroup %s, above the cgroup namespace's root: no host path names it", dir, h.Version, h.Mount, h.Root)
	}
	rel, err := filepath.Rel(h.Mount, filepath.Clean(dir))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return "", fmt.Errorf("directory %s: not inside the cgroup %s mount %s", dir, h.Version, h.Mount)
	}
	return host.Cgroup(path.Join(h.Root, filepath.ToSlash(rel))), nil
}

// Within returns cg relative to root ("." for root itself) when cg is root
// or beneath it: both are cgroup paths, or both paths of directories.
func Within(root, cg string) (string, bool) {
	// A root above the reader's cgroup namespace ("/../..", see
	// PrivateNamespace) has no path relative to it that names a cgroup:
	// path.Clean would make it "/".
	if aboveRoot(root) {
		return "", false
	}
	root, cg = path.Clean(root), path.Clean(cg)
	if !path.IsAbs(cg) {
		return "", false
	}
	if cg == root {
		return ".", true
	}
	if root == "/" {
		return cg[1:], true
	}
	if rest, ok := strings.CutPrefix(cg, root+"/"); ok {
		return rest, true
	}
	return "", false
}

// Layout is where the cgroup hierarchies memcgd uses are mounted.
type Layout struct {
	// Memory is the hierarchy that has the memory controller.
	Memory Hierarchy
	// Unified is the cgroup2 mount, if any. On a hybrid host (memory on
	// v1) it still gives PSI and cgroup.freeze per cgroup.
	Unified *Hierarchy
	// Freezer is the v1 freezer hierarchy, if any.
	Freezer *Hierarchy
	// CPU is the v1 hierarchy of the cpu controller, if any: where the
	// pacer makes its pace groups when memory is on v1.
	CPU *Hierarchy
}

// Discover finds the cgroup mounts in procRoot/self/mountinfo. The memory
// controller is on v2 when the cgroup2 mount's cgroup.controllers lists it
// (a controller is bound to one hierarchy at a time), and otherwise on the
// v1 mount whose superblock options name it.
func Discover(procRoot string) (Layout, error) {
	mounts, err := readMounts(procRoot)
	if err != nil {
		return Layout{}, fmt.Errorf("discover cgroup mounts: %w", err)
	}

	var l Layout
	var memoryV1 *Hierarchy
	for _, m := range mounts {
		h := Hierarchy{Version: V1, Mount: m.MountPoint, Root: m.Root}
		switch {
		case m.FSType == "cgroup2":
			h.Version = V2
			l.Unified = better(l.Unified, h)
		case m.FSType != "cgroup":
		case slices.Contains(m.SuperOptions, "memory"):
			memoryV1 = better(memoryV1, h)
		case slices.Contains(m.SuperOptions, "freezer"):
			l.Freezer = better(l.Freezer, h)
		case slices.Contains(m.SuperOptions, "cpu"):
			l.CPU = better(l.CPU, h)
		}
	}
	if l.Unified != nil {
		ok, err := hasController(l.Unified.Mount, "memory")
		if err != nil {
			return Layout{}, fmt.Errorf("discover cgroup mounts: %w", err)
		}
		if ok {
			l.Memory = *l.Unified
			return l, nil
		}
	}
	if memoryV1 == nil {
		return Layout{}, errors.New("discover cgroup mounts: no memory controller mounted: " +
			"want a cgroup v1 hierarchy mounted with -o memory, or a cgroup2 mount whose cgroup.controllers lists memory")
	}
	l.Memory = *memoryV1
	return l, nil
}

// better picks between two mounts of the same hierarchy: the first one,
// unless a later one shows the whole hierarchy and the first does not.
func better(old *Hierarchy, h Hierarchy) *Hierarchy {
	if old == nil || (old.Root != "/" && h.Root == "/") {
		return &h
	}
	return old
}

// hasController reports whether the cgroup at dir has controller c
// available (cgroup.controllers is a space-separated list).
func hasController(dir, c string) (bool, error) {
	p := filepath.Join(dir, "cgroup.controllers")
	b, err := os.ReadFile(p)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", p, err)
	}
	return slices.Contains(strings.Fields(string(b)), c), nil
}

// Self returns the memory cgroup of the calling process, read from
// procRoot/self/cgroup: the v1 line naming the memory controller, or the
// unified "0::" line when memory is on v2.
func Self(procRoot string, l Layout) (host.Cgroup, error) {
	if l.Memory.Version == V2 {
		return selfIn(procRoot, "")
	}
	return selfIn(procRoot, "memory")
}

// selfIn returns the calling process's cgroup in the v1 hierarchy that has
// controller c, or in the unified hierarchy when c is "".
func selfIn(procRoot, c string) (host.Cgroup, error) {
	p := filepath.Join(procRoot, "self", "cgroup")
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("own cgroup: %w", err)
	}
	lines, err := format.ParseProcCgroup(b)
	if err != nil {
		return "", fmt.Errorf("own cgroup: %s: %w", p, err)
	}
	for _, cg := range lines {
		if (c == "" && cg.ID == 0 && cg.Controllers == nil) || (c != "" && cg.Has(c)) {
			return host.Cgroup(cg.Path), nil
		}
	}
	if c == "" {
		return "", fmt.Errorf("own cgroup: %s has no unified (0::) line", p)
	}
	return "", fmt.Errorf("own cgroup: %s has no line for the %s controller", p, c)
}

// SelfUnified returns the calling process's cgroup in the unified hierarchy.
func SelfUnified(procRoot string) (host.Cgroup, error) { return selfIn(procRoot, "") }

// SelfFreezer returns the calling process's cgroup in the v1 freezer
// hierarchy.
func SelfFreezer(procRoot string) (host.Cgroup, error) { return selfIn(procRoot, "freezer") }

// SelfCPU returns the calling process's cgroup in the v1 cpu hierarchy.
func SelfCPU(procRoot string) (host.Cgroup, error) { return selfIn(procRoot, "cpu") }

// Resolve turns a command-line argument into a memory cgroup: either a
// hierarchy path as in /proc/PID/cgroup ("/a/b") or a cgroupfs directory
// under the memory mount. The cgroup must exist. A path under the memory
// mount is taken as a directory.
func (l Layout) Resolve(arg string) (host.Cgroup, error) {
	want := fmt.Sprintf("want a cgroup path such as /a/b or a directory under %s", l.Memory.Mount)
	if arg == "" || !strings.HasPrefix(arg, "/") {
		return "", fmt.Errorf("cgroup %q: %s", arg, want)
	}
	var cg host.Cgroup
	if _, ok := Within(l.Memory.Mount, arg); ok {
		var err error
		if cg, err = l.Memory.Cgroup(arg); err != nil {
			return "", fmt.Errorf("cgroup %q: %w; %s", arg, err, want)
		}
	} else {
		cg = host.Cgroup(path.Clean(arg))
	}
	dir := l.Memory.Dir(cg)
	if dir == "" {
		return "", fmt.Errorf("cgroup %q: outside the mounted subtree %s of %s; %s", arg, l.Memory.Root, l.Memory.Mount, want)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("cgroup %q: %w; %s", arg, err, want)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("cgroup %q: %s is not a directory; %s", arg, dir, want)
	}
	return cg, nil
}

// UnifiedDir returns the directory of cg in the unified hierarchy when the
// memory controller is on v1 and that directory exists. On a hybrid host
// the PSI files and cgroup.freeze of a v1 memory cgroup are those of the
// unified cgroup at the same path, which holds the same tasks when the
// manager (systemd, or memcgd's tests) keeps both trees alike. When memory
// is on v2 it is the memory directory itself.
func (l Layout) UnifiedDir(cg host.Cgroup) (string, bool) {
	if l.Memory.Version == V2 {
		d := l.Memory.Dir(cg)
		return d, d != ""
	}
	if l.Unified == nil {
		return "", false
	}
	return ExistingDir(l.Unified.Dir(cg))
}

// FreezerDir returns the directory of cg in the v1 freezer hierarchy, if
// there is one and that directory exists.
func (l Layout) FreezerDir(cg host.Cgroup) (string, bool) {
	if l.Freezer == nil {
		return "", false
	}
	return ExistingDir(l.Freezer.Dir(cg))
}

// ExistingDir returns dir and whether it is an existing directory; "" is
// none. A cgroup's directory that has gone tells a vanished cgroup from
// another error.
func ExistingDir(dir string) (string, bool) {
	if dir == "" {
		return "", false
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return "", false
	}
	return dir, true
}

// BeneathOrAt reports whether cg is top or one of its descendants.
func BeneathOrAt(top, cg host.Cgroup) bool {
	_, ok := Within(string(top), string(cg))
	return ok
}

// CheckPath refuses a cgroup path that is not absolute and clean: one with
// "..", "." or empty elements, which could name a directory outside the
// hierarchy or another cgroup than it seems to.
func CheckPath(cg host.Cgroup) error {
	s := string(cg)
	if !path.IsAbs(s) || path.Clean(s) != s || strings.Contains(s, "\n") {
		return fmt.Errorf("cgroup path %q: want an absolute, clean path such as /a/b", s)
	}
	return nil
}
