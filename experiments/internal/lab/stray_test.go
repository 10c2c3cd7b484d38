package lab

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// On the real kernel: a cgroup someone else made beneath the lab's Root,
// in its memory directory or one of its mirrors, with a task in it, as
// memcgd's freezer twin of a memory-only cgroup, does not keep Close from
// removing the lab.
func TestCloseRemovesCgroupsTheLabDidNotMake(t *testing.T) {
	l := newRealLab(t)
	var stray []string
	for _, top := range []string{l.Root.Dir, l.Root.Freezer, l.Root.Unified} {
		if top == "" {
			continue
		}
		d := filepath.Join(top, "twin", "child")
		if err := os.MkdirAll(d, 0o755); err != nil {
			l.Close()
			t.Fatal(err)
		}
		stray = append(stray, d)
	}
	// A task in the deepest memory one: a process of the lab's that a
	// daemon moved (never this test's own: Close kills what it finds).
	c, err := l.Cgroup(nil, "w", CgroupOptions{})
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	cmd := c.Command(t.Context(), "sleep", "60")
	if err := cmd.Start(); err != nil {
		l.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// The joining shell execs sleep: the PID is the sleep's, once it
	// has joined w.
	pid := strconv.Itoa(cmd.Process.Pid)
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(c.Dir, "cgroup.procs"))
		if strings.Contains(string(b), pid) {
			break
		}
		if time.Now().After(deadline) {
			l.Close()
			t.Fatalf("sleep (pid %s) did not join %s", pid, c.Dir)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(stray[0], "cgroup.procs"), []byte(pid), 0); err != nil {
		l.Close()
		t.Fatalf("move sleep into %s: %v", stray[0], err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Errorf("sleep (pid %s), moved into a stray cgroup, still runs after Close", pid)
		_ = cmd.Process.Kill()
	}
	for _, top := range []string{l.Root.Dir, l.Root.Freezer, l.Root.Unified} {
		if top == "" {
			continue
		}
		if _, err := os.Stat(top); !os.IsNotExist(err) {
			t.Errorf("%s still there after Close (%v)", top, err)
		}
	}
}

// newRealLab makes a lab on the real kernel, which the test closes. It
// skips without root, and fails without it under CI=true, where the
// real-kernel tests must run.
func newRealLab(t *testing.T) *Lab {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root to create cgroups")
		}
		t.Skip("needs root to create cgroups")
	}
	l, err := New(Options{Scratch: "/var/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	return l
}
