package lab

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/memcgd/memcgd/internal/sandbox"
)

// removeStray removes the cgroups beneath c's directories (memory, unified
// mirror, freezer mirror) that the lab did not make, deepest first: a
// daemon may make some: memcgd makes a freezer cgroup at the path of a v1
// memory cgroup that has none (issue 7 item 5, act.EnsureFreezer)
// and, by design, leaves it THAWED when it exits before the memory cgroup
// goes. Their tasks, which can only be the lab's own, are thawed and
// killed. Each removal is told on stderr, since a daemon left it behind.
func removeStray(c *Cgroup) error {
	var errs []error
	for _, top := range []string{c.Dir, c.Unified, c.Freezer} {
		if top == "" {
			continue
		}
		var dirs []string
		err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && p != top {
				dirs = append(dirs, p)
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("look for stray cgroups beneath %s: %w", top, err))
			continue
		}
		slices.Reverse(dirs) // children before their parents
		for _, d := range dirs {
			fmt.Fprintf(os.Stderr, "lab: removing %s, which the lab did not make (left behind by memcgd?)\n", d)
			errs = append(errs, removeDir(d))
		}
	}
	return errors.Join(errs...)
}

// removeDir thaws and kills the tasks of the cgroup directory d and
// removes it.
func removeDir(d string) error {
	_ = sandbox.WriteFile(filepath.Join(d, "freezer.state"), "THAWED")
	_ = sandbox.WriteFile(filepath.Join(d, "cgroup.freeze"), "0")
	deadline := time.Now().Add(settle)
	for {
		pids, _ := sandbox.Tasks(d)
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		err := os.Remove(d)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remove stray cgroup %s: %w", d, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
