package lab

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// On the real kernel: each hog spins in the lab's cpu-hogs cgroup, in a
// session of its own, and is gone once the lab is closed.
func TestHogsSpinInTheirOwnCgroupAndSession(t *testing.T) {
	l := newRealLab(t)
	closed := false
	defer func() {
		if !closed {
			l.Close()
		}
	}()
	h, err := l.StartHogs(t.Context(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.cmds) != 2 {
		t.Fatalf("%d hogs started, want 2", len(h.cmds))
	}
	// The joining shell execs the loop's shell: wait until it is in the
	// cgroup, then give it time on the CPU.
	for _, cmd := range h.cmds {
		pid := strconv.Itoa(cmd.Process.Pid)
		deadline := time.Now().Add(5 * time.Second)
		for {
			b, _ := os.ReadFile(filepath.Join(h.c.Dir, "cgroup.procs"))
			if strings.Contains(string(b), pid) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("hog %s not in %s after 5 s", pid, h.c.Dir)
			}
			time.Sleep(10 * time.Millisecond)
		}
		sid, err := unix.Getsid(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if sid != cmd.Process.Pid {
			t.Errorf("hog %s in session %d, want a session of its own", pid, sid)
		}
	}
	cpu0, err := cpuTime(h.cmds[0].Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	cpu1, err := cpuTime(h.cmds[0].Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// A loaded machine may give it only part of the time.
	if got := cpu1 - cpu0; got < 10*time.Millisecond {
		t.Errorf("a hog ran %v in 200 ms, want at least 10 ms", got)
	}
	pids := []int{h.cmds[0].Process.Pid, h.cmds[1].Process.Pid}
	dir := h.c.Dir
	closed = true
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("hog %d still running after Close", pid)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s after Close: %v, want it removed", dir, err)
	}
}
