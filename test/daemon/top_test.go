package daemon

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
)

// tmux is a tmux server of the test's own (its socket in a temporary
// directory), killed at cleanup.
type tmux struct {
	t      *testing.T
	socket string
}

// newTmux starts nothing yet; it finds tmux, or skips the test (fails it
// with CI=true).
func newTmux(t *testing.T) *tmux {
	t.Helper()
	if inTestVM() {
		// The VM's initramfs holds busybox and static test binaries, no
		// terminal multiplexer; the test needs no particular kernel, and
		// the host's run holds it.
		t.Skip("memcgd top on a terminal runs on the host, not in the test VM")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no tmux to run memcgd top on a terminal: %v (Debian: apt-get install tmux)", err)
		}
		t.Skipf("no tmux to run memcgd top on a terminal: %v", err)
	}
	x := &tmux{t: t, socket: filepath.Join(t.TempDir(), "tmux.sock")}
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", x.socket, "kill-server").Run() })
	return x
}

// run runs a tmux command and returns its output.
func (x *tmux) run(args ...string) string {
	x.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", x.socket}, args...)...).CombinedOutput()
	if err != nil {
		x.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// waitPane waits up to timeout for what the pane of session shows to
// satisfy ok, and returns what it shows last.
func (x *tmux) waitPane(session string, timeout time.Duration, ok func(string) bool) (string, bool) {
	x.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		pane := x.run("capture-pane", "-p", "-t", session)
		if ok(pane) {
			return pane, true
		}
		if time.Now().After(deadline) {
			return pane, false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// `memcgd top` on a real terminal (a detached tmux session, 160 x 40),
// against a daemon on the real kernel: it draws the header with the
// daemon's dirty-tracking path and dry-run flag and a row for the managed
// test cgroup, redraws (the second refresh counts the paces and freezes
// since the first), quits on q and on SIGTERM with status 0, and leaves
// the terminal as it found it: the same stty settings, its screen back
// (the alternate screen left).
func TestTopUnderTmux(t *testing.T) {
	l := cgrouptest.Layout(t)
	x := newTmux(t)
	parent := cgrouptest.New(t, l, 0)
	c := parent.Child(t, "toprow")
	d := newDaemon(t, managedConfig(parent.Path, "dirty_bytes: 16M"), "--dirty-tracker=off")
	d.start()
	leaf := "/" + path.Base(string(c.Path))

	for _, quit := range []string{"q", "SIGTERM"} {
		t.Run(quit, func(t *testing.T) {
			dir := t.TempDir()
			before, after := filepath.Join(dir, "stty.before"), filepath.Join(dir, "stty.after")
			script := fmt.Sprintf(`stty -g > %s; echo before-top; %s top --socket %s -d 200ms; rc=$?; stty -g > %s; echo "top exited $rc"; exec sleep 600`,
				before, d.Bin, d.Socket, after)
			session := "top-" + quit
			x.run("new-session", "-d", "-x", "160", "-y", "40", "-s", session, "sh", "-c", script)

			pane, ok := x.waitPane(session, readyTimeout*slow(), func(p string) bool {
				if !strings.Contains(p, "memcgd top   dirty tracking: poll   dry run: false") {
					return false
				}
				for _, line := range strings.Split(p, "\n") {
					if strings.Contains(line, leaf+" ") && strings.Contains(line, " idle ") && strings.HasSuffix(strings.TrimSpace(line), "0       0") {
						return true
					}
				}
				return false
			})
			t.Logf("tmux capture-pane while top runs:\n%s", strings.TrimRight(pane, "\n"))
			if !ok {
				t.Fatalf("the pane shows no header \"memcgd top   dirty tracking: poll   dry run: false\" and, refreshed, an idle row for %s", c.Path)
			}
			if strings.Contains(pane, "before-top") {
				t.Errorf("the shell's output is on top's screen: top did not switch to the alternate screen")
			}
			if quit == "q" {
				x.run("send-keys", "-t", session, "q")
			} else {
				signalTop(t, x, session)
			}
			pane, ok = x.waitPane(session, 5*time.Second, func(p string) bool { return strings.Contains(p, "top exited") })
			t.Logf("tmux capture-pane after %s:\n%s", quit, strings.TrimRight(pane, "\n"))
			if !ok {
				t.Fatalf("top did not exit within 5 s of %s", quit)
			}
			if !strings.Contains(pane, "top exited 0") {
				t.Errorf("top exited with a status other than 0")
			}
			if !strings.Contains(pane, "before-top") || strings.Contains(pane, "memcgd top") {
				t.Errorf("the terminal's screen is not restored: want the shell's lines back and top's gone")
			}
			var got [2]string
			for i, f := range []string{before, after} {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				got[i] = strings.TrimSpace(string(b))
			}
			if got[0] != got[1] {
				t.Errorf("stty -g after top = %s, want %s as before: the terminal's mode is not restored", got[1], got[0])
			}
		})
	}
}

// signalTop sends SIGTERM to the memcgd top that the shell of session
// runs: the shell's one child.
func signalTop(t *testing.T, x *tmux, session string) {
	t.Helper()
	sh := strings.TrimSpace(x.run("display-message", "-p", "-t", session, "#{pane_pid}"))
	b, err := os.ReadFile(fmt.Sprintf("/proc/%s/task/%s/children", sh, sh))
	if err != nil {
		t.Fatal(err)
	}
	kids := strings.Fields(string(b))
	if len(kids) != 1 {
		t.Fatalf("the shell %s has children %v, want memcgd top alone", sh, kids)
	}
	pid, err := strconv.Atoi(kids[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM to memcgd top (%d): %v", pid, err)
	}
}
