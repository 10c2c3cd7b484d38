package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/format"
)

// writeFile writes s to a cgroup file in one write(2), opened as the
// shell's "echo s > p" opens it (O_TRUNC, which cgroupfs ignores and a
// plain file in a test needs); the error wraps the kernel's errno.
func writeFile(p, s string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", s, p, err)
	}
	return nil
}

// timedWrite is writeFile and how long it took.
func timedWrite(p, s string) (time.Duration, error) {
	t0 := time.Now()
	err := writeFile(p, s)
	return time.Since(t0), err
}

// readTrim reads a small file without its surrounding white space.
func readTrim(p string) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// readIDs reads a list of PIDs or TIDs (tasks, cgroup.procs,
// cgroup.threads).
func readIDs(p string) ([]int, error) {
	s, err := readTrim(p)
	if err != nil {
		return nil, err
	}
	var ids []int
	for _, f := range strings.Fields(s) {
		id, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not an ID", p, f)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// errnoName is how the tables print an error: the errno's name, or the
// error's text when it has none.
func errnoName(err error) string {
	if err == nil {
		return "ok"
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		if n, ok := errnoNames[e]; ok {
			return n
		}
		return e.Error()
	}
	return err.Error()
}

var errnoNames = map[syscall.Errno]string{
	syscall.EBUSY: "EBUSY", syscall.EINVAL: "EINVAL", syscall.ENOENT: "ENOENT", syscall.EOPNOTSUPP: "EOPNOTSUPP",
	syscall.EPERM: "EPERM", syscall.EACCES: "EACCES", syscall.ESRCH: "ESRCH", syscall.ENOTEMPTY: "ENOTEMPTY",
	syscall.EEXIST: "EEXIST", syscall.ENODEV: "ENODEV", syscall.ERANGE: "ERANGE",
}

// threadCgroup is the cgroup of thread tid of process pid in the v1
// hierarchy that has controller ctrl, or in the unified one when ctrl is
// "", as /proc/PID/task/TID/cgroup prints it.
func threadCgroup(pid, tid int, ctrl string) (string, error) {
	p := fmt.Sprintf("/proc/%d/task/%d/cgroup", pid, tid)
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	lines, err := format.ParseProcCgroup(b)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	for _, cg := range lines {
		if (ctrl == "" && cg.ID == 0 && cg.Controllers == nil) || (ctrl != "" && cg.Has(ctrl)) {
			return cg.Path, nil
		}
	}
	return "", fmt.Errorf("%s: no line for %q", p, ctrl)
}

// subdirs lists the child cgroups of dir.
func subdirs(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var d []string
	for _, e := range ents {
		if e.IsDir() {
			d = append(d, filepath.Join(dir, e.Name()))
		}
	}
	return d, nil
}
