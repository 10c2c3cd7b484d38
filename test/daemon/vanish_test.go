package daemon

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/layout"
)

// A managed cgroup removed while the daemon runs, whether the daemon is
// working on it (reclaiming it and throttling its writer) or it sits
// idle, is forgotten with a log line; the daemon keeps running and keeps
// managing the rest.
func TestDaemonSurvivesVanishedCgroup(t *testing.T) {
	l := cgrouptest.Layout(t)
	within := 5 * time.Second * slow()
	parent := cgrouptest.New(t, l, 0)
	busy := parent.Child(t, "busy")
	idle := parent.Child(t, "idle")
	stays := parent.Child(t, "stays")
	setLimit(t, l, stays, 64*mib)
	startLoad(t, l, busy)
	d := newDaemon(t, managedConfig(parent.Path, activeKnobs))
	d.start()
	count := func(want int) {
		t.Helper()
		var n int
		var err error
		if _, ok := poll(within, 20*time.Millisecond, func() bool {
			n, err = d.managedCount()
			return err == nil && n == want
		}); !ok {
			t.Fatalf("the daemon reports %d cgroups (%v), want %d", n, err, want)
		}
	}
	count(4) // the parent and its three children

	// busy is under the crash tests' load: the daemon reclaims it and
	// throttles its writer all the time, by pacing its dirtiers where a
	// cpu controller is at hand and by freezing it where not.
	var s map[string]uint64
	if _, ok := poll(within, 20*time.Millisecond, func() bool {
		s = d.stat(busy.Path)
		return s["pgoutrun"] >= 1 && throttled(s) >= 1
	}); !ok {
		t.Fatalf("memcgd stat %s: pgoutrun %d, throttle_paces %d, throttle_pauses %d: want the daemon reclaiming it and throttling it",
			busy.Path, s["pgoutrun"], s["throttle_paces"], s["throttle_pauses"])
	}
	for _, c := range []*cgrouptest.Cgroup{busy, idle} {
		from := len(d.logText())
		killAll(t, c)
		rmdirs(t, l, c)
		line, ok := d.waitLog(from, within, "cgroup gone", "cgroup="+string(c.Path))
		if !ok {
			t.Errorf("no \"cgroup gone\" line for %s in the log %v after its rmdir", c.Path, within)
		} else {
			t.Log(line)
		}
		if !d.Running() {
			t.Fatalf("memcgd exited after %s was removed: %v", c.Path, d.ExitErr())
		}
	}
	count(2) // the parent and the child that stays
	if s := d.stat(stays.Path); s["limit"] != 64*mib {
		t.Errorf("memcgd stat %s: limit %d, want %d", stays.Path, s["limit"], 64*mib)
	}
	d.stop()
}

// rmdirs removes c's directories in every hierarchy, memory last, as a
// container manager tears a container down.
func rmdirs(t *testing.T, l layout.Layout, c *cgrouptest.Cgroup) {
	t.Helper()
	var dirs []string
	if dir, ok := l.FreezerDir(c.Path); ok && dir != c.Dir {
		dirs = append(dirs, dir)
	}
	if dir, ok := l.UnifiedDir(c.Path); ok && dir != c.Dir {
		dirs = append(dirs, dir)
	}
	for _, dir := range append(dirs, c.Dir) {
		// A cgroup whose last task just left may still be busy for a
		// moment (kernel/cgroup/cgroup.c cgroup_destroy_locked).
		if _, ok := poll(time.Second, 10*time.Millisecond, func() bool { return os.Remove(dir) == nil }); !ok {
			t.Fatalf("rmdir %s: %v", dir, os.Remove(dir))
		}
	}
}

// killAll kills c's tasks, as a container's end does, and returns once
// none is left. A task frozen by the daemon's throttle dies when thawed,
// at most a pause later.
func killAll(t *testing.T, c *cgrouptest.Cgroup) {
	t.Helper()
	if _, ok := poll(readyTimeout, 10*time.Millisecond, func() bool {
		b, err := os.ReadFile(filepath.Join(c.Dir, "cgroup.procs"))
		if err != nil {
			t.Fatal(err)
		}
		pids := strings.Fields(string(b))
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		return len(pids) == 0
	}); !ok {
		t.Fatalf("%s: tasks still there %v after SIGKILL", c.Path, readyTimeout)
	}
}
