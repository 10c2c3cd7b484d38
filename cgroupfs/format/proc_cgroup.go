package format

import (
	"fmt"
	"strconv"
	"strings"
)

// ProcCgroup is one line of /proc/PID/cgroup (kernel/cgroup/cgroup.c,
// proc_cgroup_show): "hierarchy-ID:controller-list:cgroup-path".
type ProcCgroup struct {
	// ID is the hierarchy ID; 0 is the unified (v2) hierarchy.
	ID int
	// Controllers are the v1 controllers bound to the hierarchy, including
	// named hierarchies such as "name=systemd"; nil for the unified one.
	Controllers []string
	// Path is the process's cgroup in that hierarchy, "/" for the root,
	// relative to the reader's cgroup namespace.
	Path string
	// Deleted reports a v2 cgroup that has been removed while the process
	// still sits in it; the kernel appends " (deleted)" to its path.
	Deleted bool
}

// ParseProcCgroup parses /proc/PID/cgroup.
func ParseProcCgroup(b []byte) ([]ProcCgroup, error) {
	var cgs []ProcCgroup
	for n := 1; len(b) > 0; n++ {
		var line []byte
		line, b = nextLine(b)
		if len(line) == 0 {
			continue
		}
		cg, err := parseProcCgroupLine(string(line))
		if err != nil {
			return nil, fmt.Errorf("cgroup line %d %q: %w", n, line, err)
		}
		cgs = append(cgs, cg)
	}
	return cgs, nil
}

func parseProcCgroupLine(line string) (ProcCgroup, error) {
	// The path is last and may itself hold colons.
	f := strings.SplitN(line, ":", 3)
	if len(f) != 3 {
		return ProcCgroup{}, fmt.Errorf("want ID:controllers:path")
	}
	id, err := strconv.Atoi(f[0])
	if err != nil || id < 0 {
		return ProcCgroup{}, fmt.Errorf("hierarchy ID %q: want a number >= 0", f[0])
	}
	cg := ProcCgroup{ID: id}
	cg.Path, cg.Deleted = strings.CutSuffix(f[2], " (deleted)")
	// A task whose cgroup is already gone prints no path at all (the
	// !cgrp case of proc_cgroup_show in recent kernels).
	if !strings.HasPrefix(cg.Path, "/") && !(cg.Deleted && cg.Path == "") {
		return ProcCgroup{}, fmt.Errorf("path %q: want an absolute path", f[2])
	}
	if f[1] != "" {
		cg.Controllers = strings.Split(f[1], ",")
	}
	return cg, nil
}

// Has reports whether the hierarchy has controller c bound.
func (p ProcCgroup) Has(c string) bool {
	for _, x := range p.Controllers {
		if x == c {
			return true
		}
	}
	return false
}
