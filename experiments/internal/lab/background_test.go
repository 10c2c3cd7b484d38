package lab

import (
	"context"
	"strings"
	"testing"
)

// A background process reports ready, runs until its input ends, and its
// report is what it printed after the ready line. It runs in the cgroup.
func TestBackgroundRunsUntilItsInputEnds(t *testing.T) {
	l := newRealLab(t)
	defer func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	}()
	c, err := l.Cgroup(nil, "bg", CgroupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.Start(context.Background(), c, "sh", "-c", `echo "ready $$"; cat >/dev/null; cat /proc/self/cgroup`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.Ready, "ready ") {
		t.Errorf("Ready = %q, want the first line, \"ready PID\"", p.Ready)
	}
	out, _, err := p.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), string(c.Path)) {
		t.Errorf("after its ready line it printed %q: want its /proc/self/cgroup, with %s", out, c.Path)
	}
}

func TestBackgroundWithoutAReadyLineFails(t *testing.T) {
	l := newRealLab(t)
	defer func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	}()
	c, err := l.Cgroup(nil, "bg", CgroupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Start(context.Background(), c, "sh", "-c", "echo oops >&2; exit 3"); err == nil || !strings.Contains(err.Error(), "oops") {
		t.Errorf("Start of a command that exits at once: %v, want an error with its stderr", err)
	}
}
