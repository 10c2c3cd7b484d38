package daemon

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/act"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/internal/sandbox"
)

// On a v1 host the daemon throttles a cgroup that exists in the memory
// hierarchy only through a freezer cgroup it makes at the same path
// (act.EnsureFreezer). At SIGTERM it removes those that are empty: a
// mirror whose tasks have exited goes, though its memory cgroup stays; one
// that still holds a task stays, thawed, with the task in it.
func TestStopRemovesEmptyFreezerMirrors(t *testing.T) {
	l := cgrouptest.Layout(t)
	if l.Memory.Version != layout.V1 || l.Freezer == nil {
		t.Skipf("memory on %s with no v1 freezer: the daemon makes no freezer mirror", l.Memory.Version)
	}
	// 1 MiB writes under a 4 MiB dirty limit: the writers dirty faster
	// than the write-out drains, so the throttle, the freezer here, must
	// act (with 4 KiB writes and 16 MiB the write-out alone held one).
	// Off the VM's throttled disk each writes four times as much: 96 MiB
	// took a host's 2.5 GB/s disk and the write-out tens of milliseconds,
	// in which a writer was once never frozen.
	const dirtyBytes, block = 4 * mib, mib
	limit, written := uint64(1<<30)/uint64(slow()), int64(384*mib)/int64(slow())
	parent := cgrouptest.New(t, l, 0)
	exited, running := host.Cgroup(path.Join(string(parent.Path), "exited")), host.Cgroup(path.Join(string(parent.Path), "running"))
	exitedDir, runningDir := l.Freezer.Dir(exited), l.Freezer.Dir(running)
	// Registered before the cgroups and the writers, so that it runs
	// after they are gone: nothing the test or the daemon made stays.
	t.Cleanup(func() {
		for deadline := time.Now().Add(sandbox.Settle); ; time.Sleep(10 * time.Millisecond) {
			if err := act.RemoveFreezer([]string{exitedDir, runningDir}); err != nil {
				t.Errorf("cleanup: %v", err)
			}
			_, err1 := os.Stat(exitedDir)
			_, err2 := os.Stat(runningDir)
			if errors.Is(err1, os.ErrNotExist) && errors.Is(err2, os.ErrNotExist) || time.Now().After(deadline) {
				return
			}
		}
	})
	ec, rc := memoryOnlyCgroup(t, l, exited, limit), memoryOnlyCgroup(t, l, running, limit)
	// limited_only: the unlimited parent, whose freezer cgroup would hold
	// the tasks moved beneath it, is not throttled.
	d := newDaemon(t, fmt.Sprintf("version: 1\nmanage: {under: %s, limited_only: true}\ndefaults: {dirty_background_bytes: %d, dirty_bytes: %d}\n",
		parent.Path, dirtyBytes/2, dirtyBytes))
	d.start()
	dir := diskDir(t)
	// The throttle freezes each writer, through the mirror it makes. A
	// writer that the write-out alone keeps below the freeze level (the
	// host's disk can take its whole write within tens of milliseconds)
	// is followed by another in the same cgroup, up to three: the test is
	// of what the daemon leaves at exit, not of how soon it freezes.
	writers := func(c *sandbox.Cgroup, name, mirror string) []*exec.Cmd {
		var cmds []*exec.Cmd
		for i := range 3 {
			cmds = append(cmds, startBareWriter(t, c, filepath.Join(dir, fmt.Sprintf("%s-%d", name, i)), written, block))
			if _, ok := poll(readyTimeout*slow()/3, 10*time.Millisecond, func() bool { _, err := os.Stat(mirror); return err == nil }); ok {
				return cmds
			}
		}
		t.Fatalf("no freezer mirror %s after %d writers of %d MiB: the daemon did not throttle its memory cgroup", mirror, len(cmds), written/mib)
		return nil
	}
	gone, stays := writers(ec, "exited", exitedDir), writers(rc, "running", runningDir)
	t.Logf("memcgd stat %s: throttle_pauses %d", exited, d.stat(exited)["throttle_pauses"])
	// A killed task dies once thawed, within the throttle's MaxPause, and
	// leaves its cgroup a moment after it is reaped.
	for _, w := range gone {
		if err := w.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = w.Wait()
	}
	if _, ok := poll(sandbox.Settle, 10*time.Millisecond, func() bool {
		pids, err := sandbox.Tasks(exitedDir)
		return err == nil && len(pids) == 0
	}); !ok {
		t.Fatalf("%s still holds tasks after its writer was reaped", exitedDir)
	}

	d.stop()
	if _, err := os.Stat(exitedDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after SIGTERM: the empty freezer mirror %s: %v, want it removed", exitedDir, err)
	}
	if _, err := os.Stat(ec.Dir); err != nil {
		t.Errorf("after SIGTERM: the memory cgroup %s: %v, want it left", ec.Dir, err)
	}
	if state := readFile(t, filepath.Join(runningDir, "freezer.state")); state != "THAWED" {
		t.Errorf("after SIGTERM: %s is %s, want the mirror that holds a task left THAWED", runningDir, state)
	}
	if pids, err := sandbox.Tasks(runningDir); err != nil || !slices.Contains(pids, stays[0].Process.Pid) {
		t.Errorf("after SIGTERM: %s holds %v (%v), want the writer %d still in it", runningDir, pids, err, stays[0].Process.Pid)
	}
	// The freezer anchor (act.FreezerAnchor) is let go at exit before the
	// undo of what is still journalled: the undo finds none of it, and its
	// release finds its own record.
	anchor := filepath.Join(l.Freezer.Dir(parent.Path), act.AnchorName)
	if _, err := os.Stat(anchor); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after SIGTERM: the freezer anchor %s: %v, want it removed", anchor, err)
	}
	for line := range strings.Lines(d.logText()) {
		if strings.Contains(line, "release the v1 freezer anchor") || strings.Contains(line, "undid at exit") && strings.Contains(line, act.AnchorName) {
			t.Errorf("daemon log: %s", strings.TrimSpace(line))
		}
	}
}
