package sandbox

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The shell writes its PID into each directory's cgroup.procs (here a
// plain file, so that no root is needed) and then becomes the command: the
// command prints the same PID, and its exit status is the command's.
func TestJoinArgvRunsTheCommandAsTheProcessThatJoined(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	argv := JoinArgv(dirs, 0, "sh", "-c", `echo $$; exit 7`)
	cmd := exec.Command(argv[0], argv[1:]...)
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
		t.Fatalf("exit: %v, want status 7, the command's", err)
	}
	pid := strings.TrimSpace(string(out))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(b)); got != pid {
			t.Errorf("%s/cgroup.procs holds %q, want the command's PID %s", d, got, pid)
		}
	}
}

// A directory the shell cannot join stops it before the command runs.
func TestJoinArgvStopsWhereAJoinFails(t *testing.T) {
	ran := filepath.Join(t.TempDir(), "ran")
	argv := JoinArgv([]string{filepath.Join(t.TempDir(), "missing")}, 0, "touch", ran)
	err := exec.Command(argv[0], argv[1:]...).Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 126 {
		t.Errorf("exit: %v, want status 126", err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the command ran although the join failed")
	}
}

// With notify, a line arrives on that descriptor after the joins, and the
// command does not inherit it.
func TestJoinArgvNotifiesOnceInside(t *testing.T) {
	dir := t.TempDir()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	argv := JoinArgv([]string{dir}, 3, "sh", "-c", `if { true >&3; } 2>/dev/null; then echo open; else echo closed; fi`)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.ExtraFiles = []*os.File{w}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if _, err := bufio.NewReader(r).ReadString('\n'); err != nil {
		t.Fatalf("no line on the notify descriptor: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
		t.Errorf("notified before joining: %v", err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(line) != "closed" {
		t.Errorf("the command sees descriptor 3 %s, want it closed", strings.TrimSpace(line))
	}
}

func TestChildRefusesANameThatIsNotOneElement(t *testing.T) {
	c := &Cgroup{Path: "/a"}
	for _, name := range []string{"", ".", "..", "b/c", "b\nc"} {
		if _, err := c.Child(name, Options{}); err == nil || !strings.Contains(err.Error(), "single path element") {
			t.Errorf("Child(%q) = %v, want a refusal naming a single path element", name, err)
		}
	}
}
