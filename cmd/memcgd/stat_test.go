package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/layout"
)

// realKernel skips (or, with CI=true, fails) a test that needs root and
// the real cgroupfs.
func realKernel(t *testing.T) layout.Layout {
	t.Helper()
	l, err := layout.Discover("/proc")
	if err == nil && os.Geteuid() != 0 {
		err = os.ErrPermission
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("real-kernel test cannot run: %v", err)
		}
		t.Skipf("needs root and cgroupfs: %v", err)
	}
	return l
}

// statFields are the lines `memcgd stat` must print for every cgroup.
var statFields = []string{
	"usage", "limit", "dirty", "writeback", "dirty_background_thresh", "dirty_thresh",
	"min_free_kbytes", "low_wmark", "high_wmark", "writeback_first",
	"kswapd_steal", "kswapd_pgscan", "pg_pgsteal", "pg_scan", "pgrefill", "allocstall",
}

func TestStatListsCgroupsOnTheRealKernel(t *testing.T) {
	l := realKernel(t)
	self, err := layout.Self("/proc", l)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := newRootCmd(&out, io.Discard)
	// No daemon answers on this socket: stat reads cgroupfs itself.
	cmd.SetArgs([]string{"stat", "--socket", filepath.Join(t.TempDir(), "none.sock"), string(self)})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("memcgd stat %s: %v", self, err)
	}
	text := out.String()
	if !strings.HasPrefix(text, "cgroup "+string(self)+"\n") {
		t.Errorf("output does not start with the cgroup line:\n%s", text)
	}
	for _, f := range statFields {
		if !strings.Contains(text, "\n"+f+" ") {
			t.Errorf("no %s line in:\n%s", f, text)
		}
	}

	out.Reset()
	cmd = newRootCmd(&out, io.Discard)
	cmd.SetArgs([]string{"stat", "--json", "--socket", filepath.Join(t.TempDir(), "none.sock"), l.Memory.Dir(self)})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("memcgd stat --json DIR: %v", err)
	}
	var got []struct {
		Cgroup string         `json:"cgroup"`
		Stats  map[string]any `json:"stats"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got) != 1 || got[0].Cgroup != string(self) {
		t.Fatalf("stat --json of a cgroupfs directory = %s (%v)", out.String(), err)
	}
	if usage, ok := got[0].Stats["usage"].(float64); !ok || usage == 0 {
		t.Errorf("usage of our own cgroup is %#v, want a number of bytes", got[0].Stats["usage"])
	}
	if wb, ok := got[0].Stats["writeback_first"].(bool); !ok || !wb {
		t.Errorf("writeback_first is %#v, want true as the default policy has it", got[0].Stats["writeback_first"])
	}
	if lim, ok := got[0].Stats["limit"]; !ok || lim != nil && lim.(float64) == 0 {
		t.Errorf("limit is %#v, want bytes or null (no limit)", lim)
	}
}

// The acceptance of `memcgd stat`: without root or without cgroupfs it
// exits non-zero with a one-line reason and no stack trace.
func TestStatFailsWithOneLine(t *testing.T) {
	realKernel(t) // needs root to drop to another user
	dir := t.TempDir()
	// nobody must reach the binary: open the test's temporary directories.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "memcgd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	noCgroupfs := t.TempDir()
	if err := os.MkdirAll(filepath.Join(noCgroupfs, "self"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(noCgroupfs, "self", "mountinfo"), []byte("22 1 0:21 / /proc rw - proc proc rw\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cmd  *exec.Cmd
		want string
	}{
		{"not root", exec.Command(bin, "stat"), "must run as root"},
		{"no cgroupfs", exec.Command(bin, "stat", "--proc", noCgroupfs), "no memory controller mounted"},
	}
	tests[0].cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			tt.cmd.Stderr = &stderr
			err := tt.cmd.Run()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
				t.Fatalf("exit: %v, want a non-zero exit", err)
			}
			msg := stderr.String()
			if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "memcgd: ") || !strings.Contains(msg, tt.want) {
				t.Errorf("stderr = %q, want one line \"memcgd: ...%s...\"", msg, tt.want)
			}
		})
	}
}
