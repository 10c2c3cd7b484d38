package cgrouptest

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs"
	"github.com/memcgd/memcgd/cgroupfs/dirtytrack"
	"github.com/memcgd/memcgd/cgroupfs/journal"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
)

// LoadTracker loads the eBPF dirty tracker, or skips; with CI=true it
// fails: the kernels the project tests on must run it. It is closed at
// cleanup.
func LoadTracker(t testing.TB) *dirtytrack.Tracker {
	t.Helper()
	return LoadTrackerOptions(t, dirtytrack.Options{})
}

// LoadTrackerOptions is LoadTracker with opts (Levels: the level
// programs, where the kernel allows them).
func LoadTrackerOptions(t testing.TB, opts dirtytrack.Options) *dirtytrack.Tracker {
	t.Helper()
	tr, err := dirtytrack.Load(opts)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("load the dirty tracker: %v", err)
		}
		t.Skipf("load the dirty tracker: %v", err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// FS returns the host of the cgroups beneath under in l, with the journal
// j (nil: read-only) and the tracker tr (nil: the fallback).
func FS(t testing.TB, l layout.Layout, under host.Cgroup, j *journal.Journal, tr *dirtytrack.Tracker) *cgroupfs.FS {
	t.Helper()
	fs, err := cgroupfs.NewFSOptions(l, procRoot, under, j, cgroupfs.FSOptions{Tracker: tr})
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// AwaitOpen waits until process pid has file open, at most 5 s.
func AwaitOpen(t testing.TB, pid int, file string) {
	t.Helper()
	fds := filepath.Join(procRoot, strconv.Itoa(pid), "fd")
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		entries, _ := os.ReadDir(fds)
		for _, e := range entries {
			if target, _ := os.Readlink(filepath.Join(fds, e.Name())); target == file {
				return
			}
		}
	}
	t.Fatalf("process %d did not open %s within 5 s", pid, file)
}
