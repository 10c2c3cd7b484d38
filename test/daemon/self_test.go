package daemon

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/layout"
)

// Issue 9, defect 1: the daemon runs inside a managed cgroup, beside a
// writer past the freerun ceiling of dirty_bytes 1M. It never freezes that
// cgroup nor its parent (it would freeze itself, and nothing would thaw
// it), logs both as "not throttled: holds memcgd", and keeps answering; it
// still throttles the same writer in a sibling cgroup.
func TestDaemonNeverFreezesItself(t *testing.T) {
	l := cgrouptest.Layout(t)
	within := 5 * time.Second * slow()
	const limit = 200 * mib
	parent := cgrouptest.New(t, l, 0)
	home := parent.Child(t, "memcgd")
	other := parent.Child(t, "other")
	for _, c := range []*cgrouptest.Cgroup{home, other} {
		setLimit(t, l, c, limit)
		if !hasFreezer(l, c) {
			t.Fatalf("no freezer reaches %s: the daemon could not throttle it, so the test shows nothing", c.Path)
		}
	}
	dir := diskDir(t)
	for _, c := range []*cgrouptest.Cgroup{home, other} {
		c.Start(t, "sh", "-c", `i=0; while :; do dd if=/dev/zero of="$0.$i" bs=1M count=16 2>/dev/null; rm -f "$0.$((i-1))"; i=$((i+1)); sleep 0.05; done`,
			filepath.Join(dir, filepath.Base(string(c.Path))))
		// Each pass writes a new file and deletes the one before: new
		// pages, charged anew, which the daemon's watch sees.
	}

	// A limit of 1 MiB: one 1 MiB write() on top of any backlog passes it.
	// With 8M, the v2 VM's disk (50 MB/s) kept pace with its emulated CPU
	// (about 40 MB/s of dirtying) and the sibling was at times never
	// throttled in 40 s (a CI run), so the test showed nothing.
	d := newDaemon(t, managedConfig(parent.Path, "dirty_bytes: 1M, dirty_background_bytes: 512K, min_free_kbytes: 0"))
	d.Join = joinDirs(l, home)
	from := len(d.logText())
	d.start()

	// Watch both freezers that hold the daemon, as fast as they can be
	// read, until the sibling has been throttled a few times. The
	// closed-loop throttle counts a pause when it thaws (agent/throttle.go),
	// and holds a freeze while the dirty pages drain: on the VM's
	// throttled disk and emulated CPUs a pause can take most of a second,
	// and the writer long to dirty past the freerun ceiling again (once 1
	// pause in 20 s). So the watch ends at within only once there was a
	// pause, else goes on up to twice within; one pause is the least that
	// shows the writer, beside the daemon's cgroup, throttled.
	const pauses, least = 3, 1
	var frozenSeen []string
	var reads, otherFrozen int // otherFrozen: the sibling's freezes the watch saw begin
	wasFrozen := false
	start := time.Now()
	for asked := start; ; {
		for _, c := range []*cgrouptest.Cgroup{home, parent} {
			if f := frozen(t, l, c); len(f) > 0 && len(frozenSeen) < 10 {
				frozenSeen = append(frozenSeen, fmt.Sprintf("%v: %v", time.Since(start).Round(time.Millisecond), f))
			}
		}
		isFrozen := len(frozen(t, l, other)) > 0
		if isFrozen && !wasFrozen {
			otherFrozen++
		}
		wasFrozen = isFrozen
		reads++
		if time.Since(asked) >= 200*time.Millisecond {
			asked = time.Now()
			st, err := d.tryStat(other.Path)
			if err != nil {
				t.Fatalf("the daemon no longer answers: %v; its cgroups were frozen: %v", err, frozenSeen)
			}
			n, took := throttled(st), time.Since(start)
			if n >= pauses || n >= least && took > within || took > 2*within {
				break
			}
		}
		time.Sleep(time.Millisecond)
	}
	watched := time.Since(start).Round(time.Millisecond)
	if len(frozenSeen) > 0 {
		t.Errorf("the cgroups holding the daemon were frozen (%d reads over %v): %v", reads, watched, frozenSeen)
	}
	st := d.stat(other.Path)
	n := throttled(st)
	t.Logf("memcgd stat %s: throttle_paces %d, throttle_pauses %d over %v; the watch saw it frozen %d times in %d reads",
		other.Path, st["throttle_paces"], st["throttle_pauses"], watched, otherFrozen, reads)
	if n < least {
		t.Errorf("memcgd stat %s: throttle_paces+throttle_pauses %d within %v, want at least %d: the writer beside the daemon's cgroup is not throttled, so the test shows nothing", other.Path, n, 2*within, least)
	}
	if st := d.stat(home.Path); throttled(st) != 0 {
		t.Errorf("memcgd stat %s: throttle_paces %d, throttle_pauses %d, want 0 in the daemon's own cgroup", home.Path, st["throttle_paces"], st["throttle_pauses"])
	}
	for _, c := range []*cgrouptest.Cgroup{home, parent} {
		if line, ok := d.waitLog(from, time.Second, "not throttled: holds memcgd", "cgroup="+string(c.Path)); !ok {
			t.Errorf("no \"not throttled: holds memcgd\" line for %s in the log", c.Path)
		} else {
			t.Log(line)
		}
	}
	if n, err := d.managedCount(); err != nil || n != 3 {
		t.Errorf("the daemon reports %d cgroups (%v), want 3: it no longer answers", n, err)
	}
	d.stop()
}

// joinDirs are the directories a task joins to be in c in every
// hierarchy: its memory cgroup and, on a hybrid host, the unified and
// freezer cgroups at the same path that the test created.
func joinDirs(l layout.Layout, c *cgrouptest.Cgroup) []string {
	dirs := []string{c.Dir}
	if dir, ok := l.UnifiedDir(c.Path); ok && dir != c.Dir {
		dirs = append(dirs, dir)
	}
	if dir, ok := l.FreezerDir(c.Path); ok && dir != c.Dir {
		dirs = append(dirs, dir)
	}
	return dirs
}

// throttled counts a cgroup's throttle actions, paces and freezes alike:
// the daemon paces where a cpu controller reaches the cgroup and freezes
// where none does.
func throttled(st map[string]uint64) uint64 {
	return st["throttle_paces"] + st["throttle_pauses"]
}
