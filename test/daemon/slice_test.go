package daemon

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"golang.org/x/sys/unix"
)

// The daemon runs its threads at a short scheduler slice (--sched-slice,
// 300 µs by default) where the kernel keeps one for SCHED_OTHER tasks
// (6.12 and later), so that its wake-ups preempt sooner; on an older
// kernel it says at start that it kept the kernel's default. Every thread
// counts, those the Go runtime made after the start included.
func TestDaemonThreadsRunAtTheSchedSlice(t *testing.T) {
	l := cgrouptest.Layout(t)
	parent := cgrouptest.New(t, l, 0)
	d := newDaemon(t, managedConfig(parent.Path, "dirty_bytes: 64M, min_free_kbytes: 0"))
	d.start()
	defer d.stop()

	release, ok := cgrouptest.KernelAtLeast(t, 6, 12)
	if !ok {
		if _, ok := d.waitLog(0, readyTimeout, "scheduler slice: kept the kernel's default", "6.12"); !ok {
			t.Fatalf("kernel %s keeps no custom slice, and the daemon did not say so; log:\n%s", release, tail(d.logText(), 20))
		}
		return
	}
	if _, ok := d.waitLog(0, readyTimeout, "scheduler slice set", "slice=300µs"); !ok {
		t.Errorf("the daemon did not log its slice; log:\n%s", tail(d.logText(), 20))
	}
	time.Sleep(200 * time.Millisecond) // its threads made in its first steps
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", d.PID()))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range tasks {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		a, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue // exited meanwhile
		}
		n++
		if a.Runtime != uint64(300*time.Microsecond) {
			t.Errorf("daemon thread %d: slice %v, want 300µs", tid, time.Duration(a.Runtime))
		}
	}
	if n < 2 {
		t.Fatalf("read the slice of %d daemon threads, want every one of them (a Go process has several)", n)
	}
	t.Logf("kernel %s: %d daemon threads, all at a 300µs slice", release, n)
}
