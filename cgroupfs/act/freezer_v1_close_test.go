package act_test

import (
	"context"
	"errors"
	"os"
	"path"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/act"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/journal"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/internal/sandbox"
)

// At exit (FS.Close) the freezer cgroups FS made for the throttle go, once
// empty, though their memory cgroups stay: a mirror whose tasks have all
// exited is removed, one that still holds a task stays. The freezer
// anchor, frozen from the first freeze on, is thawed and removed.
func TestFSCloseRemovesEmptyMirrors(t *testing.T) {
	l, p := v1Freezer(t)
	v1only := l
	v1only.Unified = nil // the v1 freezer, as on a host without a unified mirror
	empty, busy := host.Cgroup(path.Join(string(p.Path), "exited")), host.Cgroup(path.Join(string(p.Path), "running"))
	emptyDir, busyDir := l.Freezer.Dir(empty), l.Freezer.Dir(busy)
	// Registered before the cgroups and the writers, so that it runs
	// after they are gone: nothing the test made may stay.
	t.Cleanup(func() {
		for deadline := time.Now().Add(sandbox.Settle); ; {
			if err := act.RemoveFreezer([]string{emptyDir, busyDir}); err != nil {
				t.Errorf("RemoveFreezer: %v", err)
			}
			_, err1 := os.Stat(emptyDir)
			_, err2 := os.Stat(busyDir)
			if errors.Is(err1, os.ErrNotExist) && errors.Is(err2, os.ErrNotExist) {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("cleanup left %s or %s behind", emptyDir, busyDir)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	anchor := anchorDir(t, l, p.Path)
	fs := cgrouptest.FS(t, v1only, p.Path, cgrouptest.Journal(t, l), nil)
	ec, bc := memoryOnly(t, l, empty), memoryOnly(t, l, busy)
	gone := startWriter(t, ec.Dir, emptyDir)
	startWriter(t, bc.Dir, busyDir)
	for _, cg := range []host.Cgroup{empty, busy} {
		f, err := fs.Freeze(context.Background(), cg)
		if err != nil {
			t.Fatalf("Freeze of memory-only %s: %v", cg, err)
		}
		if err := f.End(); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{emptyDir, busyDir} {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("no freezer mirror after Freeze: %v", err)
		}
	}
	if got := readState(t, anchor); got != journal.FreezerFrozenV1 {
		t.Errorf("after the freezes: the anchor's freezer.state %q, want %q", got, journal.FreezerFrozenV1)
	}
	if err := gone.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = gone.Wait()
	// A killed task leaves its cgroup a moment after it is reaped.
	for deadline := time.Now().Add(sandbox.Settle); ; time.Sleep(10 * time.Millisecond) {
		pids, err := sandbox.Tasks(emptyDir)
		if err != nil {
			t.Fatal(err)
		}
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still holds %v after its writer was reaped", emptyDir, pids)
		}
	}

	fs.Close()
	if _, err := os.Stat(emptyDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Close: %s: %v, want it removed", emptyDir, err)
	}
	if _, err := os.Stat(ec.Dir); err != nil {
		t.Errorf("after Close: the memory cgroup %s: %v, want it left", ec.Dir, err)
	}
	if _, err := os.Stat(busyDir); err != nil {
		t.Errorf("after Close: %s, which holds a task: %v, want it left", busyDir, err)
	}
	if _, err := os.Stat(anchor); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Close: the anchor %s: %v, want it removed", anchor, err)
	}
}
