package layout

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/memcgd/memcgd/cgroupfs/format"
)

// The kernel shows a cgroup path relative to the reader's cgroup namespace
// (kernel/cgroup/namespace.c): in /proc/PID/cgroup (kernel/cgroup/cgroup.c,
// proc_cgroup_show, cgroup_path_ns) and as the root of a cgroup mount in
// mountinfo (cgroup_show_path), both from the namespace of the task that
// reads. A process in a namespace of its own sees the cgroup it was in at
// unshare(2) as "/", the cgroups above it as "/..", "/../..", and nothing
// that names the host path of its namespace's root. memcgd names cgroups
// by their host paths everywhere (config, journal, logs, metrics, the
// exemption of its own cgroups), so it must not take such paths for them.

// PrivateNamespace returns the signs, read from procRoot and the mounts of
// l, that the calling process is in a cgroup namespace whose root is not
// the hierarchies' root, so that the cgroup paths it reads are not the
// host's. It returns none when it finds none; at most one sign per kind.
// A sign it cannot read (PID 1's namespace without ptrace access to PID 1)
// is left out.
func PrivateNamespace(procRoot string, l Layout) ([]string, error) {
	var signs []string
	mounts, err := readMounts(procRoot)
	if err != nil {
		return nil, fmt.Errorf("cgroup namespace: %w", err)
	}
	for _, m := range mounts {
		if (m.FSType == "cgroup" || m.FSType == "cgroup2") && aboveRoot(m.Root) {
			signs = append(signs, fmt.Sprintf("the cgroup mount at %s shows cgroup %s, above the namespace's root", m.MountPoint, m.Root))
			break
		}
	}

	p := filepath.Join(procRoot, "self", "cgroup")
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("cgroup namespace: %w", err)
	}
	lines, err := format.ParseProcCgroup(b)
	if err != nil {
		return nil, fmt.Errorf("cgroup namespace: %s: %w", p, err)
	}
	for _, cg := range lines {
		if aboveRoot(cg.Path) {
			signs = append(signs, fmt.Sprintf("%s gives its cgroup as %s, outside the namespace's root", p, cg.Path))
			break
		}
	}

	for _, h := range []*Hierarchy{&l.Memory, l.Unified, l.Freezer} {
		if h == nil || h.Root != "/" {
			continue
		}
		root, why, err := isHierarchyRoot(*h)
		if err != nil {
			return nil, fmt.Errorf("cgroup namespace: %w", err)
		}
		if !root {
			signs = append(signs, fmt.Sprintf("the cgroup shown as / at %s is not its hierarchy's root (%s)", h.Mount, why))
			break
		}
	}

	own, errOwn := CgroupNamespace(procRoot, "self")
	pid1, errPID1 := CgroupNamespace(procRoot, "1")
	if errOwn == nil && errPID1 == nil && own != pid1 {
		signs = append(signs, fmt.Sprintf("its cgroup namespace %s is not PID 1's, %s", own, pid1))
	}
	return signs, nil
}

// readMounts parses procRoot/self/mountinfo.
func readMounts(procRoot string) ([]format.Mount, error) {
	p := filepath.Join(procRoot, "self", "mountinfo")
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	mounts, err := format.ParseMountInfo(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return mounts, nil
}

// aboveRoot reports whether a cgroup path as the kernel shows it leads out
// of the reader's namespace: kernfs_path_from_node (fs/kernfs/dir.c)
// writes one ".." per level from the namespace's root up to the common
// ancestor.
func aboveRoot(p string) bool {
	return slices.Contains(strings.Split(p, "/"), "..")
}

// isHierarchyRoot reports whether the directory at h.Mount is its
// hierarchy's root cgroup, and if not, why not. The kernel creates some
// core files in the root alone and some in every cgroup but the root, by
// the real parent, whatever the namespace (kernel/cgroup/cgroup.c,
// cgroup_addrm_files: CFTYPE_ONLY_ON_ROOT, CFTYPE_NOT_ON_ROOT): on v1,
// release_agent is only on the root (cgroup-v1.c, cgroup1_base_files); on
// v2, cgroup.events (4.5 and later) and cgroup.type (4.14 and later) are
// on every cgroup but the root (cgroup.c, cgroup_base_files).
func isHierarchyRoot(h Hierarchy) (bool, string, error) {
	if h.Version == V1 {
		ok, err := exists(filepath.Join(h.Mount, "release_agent"))
		return ok, "it has no release_agent", err
	}
	for _, f := range []string{"cgroup.type", "cgroup.events"} {
		ok, err := exists(filepath.Join(h.Mount, f))
		if err != nil || ok {
			return false, "it has " + f, err
		}
	}
	return true, "", nil
}

func exists(p string) (bool, error) {
	_, err := os.Lstat(p)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("check %s: %w", p, err)
}

// CgroupNamespace names the cgroup namespace of the process pid ("self",
// or a number) as procRoot/PID/ns/cgroup does: "cgroup:[inode]", the same
// for two processes exactly when they share the namespace. Reading another
// process's needs ptrace read access to it (fs/proc/namespaces.c,
// proc_ns_get_link).
func CgroupNamespace(procRoot, pid string) (string, error) {
	p := filepath.Join(procRoot, pid, "ns", "cgroup")
	ns, err := os.Readlink(p)
	if err != nil {
		return "", fmt.Errorf("cgroup namespace: %w", err)
	}
	return ns, nil
}
