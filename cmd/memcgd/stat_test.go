package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/cgroupfs/observe"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/sched"
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

// Without a daemon, `memcgd stat` reads cgroupfs, says so on stderr in one
// line, and marks the cgroups the config would not manage as such, with
// the reason, without the knobs, thresholds and watermarks it would not put
// in force: an unlimited cgroup under the default policy (limited_only),
// one outside manage.under. A limited cgroup gets every line.
func TestStatWithoutDaemonOnTheRealKernel(t *testing.T) {
	l := realKernel(t)
	self, err := layout.Self("/proc", l)
	if err != nil {
		t.Fatal(err)
	}
	if limitedAbove(t, l, self) {
		t.Skipf("this process's memory cgroup %s or an ancestor has a limit: an unlimited test cgroup cannot be made beneath it", self)
	}
	limited := cgrouptest.New(t, l, 256<<20)
	unlimited := cgrouptest.New(t, l, 0)
	underLimited := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(underLimited, []byte(fmt.Sprintf("version: 1\nmanage: {under: %s, limited_only: true}\n", limited.Path)), 0o600); err != nil {
		t.Fatal(err)
	}
	stat := func(args ...string) (stdout, stderr string) {
		t.Helper()
		var out, errOut bytes.Buffer
		cmd := newRootCmd(&out, &errOut)
		// No daemon answers on this socket: stat reads cgroupfs itself.
		cmd.SetArgs(append([]string{"stat", "--socket", filepath.Join(t.TempDir(), "none.sock")}, args...))
		if err := cmd.Execute(); err != nil {
			t.Fatalf("memcgd stat %v: %v", args, err)
		}
		return out.String(), errOut.String()
	}
	policyLines := []string{"dirty_ratio", "dirty_background_thresh", "dirty_thresh", "min_free_kbytes", "low_wmark", "high_wmark", "writeback_first"}
	tests := []struct {
		name      string
		args      []string
		cgroup    string
		unmanaged string // "" for managed
	}{
		{"limited, default policy", []string{string(limited.Path)}, string(limited.Path), ""},
		{"limited, as a cgroupfs directory", []string{limited.Dir}, string(limited.Path), ""},
		{"unlimited, default policy", []string{string(unlimited.Path)}, string(unlimited.Path), sched.NotLimited},
		{"outside manage.under", []string{"--config", underLimited, string(unlimited.Path)}, string(unlimited.Path),
			"it is outside manage.under (" + string(limited.Path) + ")"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, errText := stat(tt.args...)
			if strings.Count(errText, "\n") != 1 || !strings.Contains(errText, "reading cgroupfs directly") {
				t.Errorf("stderr = %q, want one line saying cgroupfs is read directly", errText)
			}
			head := fmt.Sprintf("cgroup %s\nmanaged %t\n", tt.cgroup, tt.unmanaged == "")
			if tt.unmanaged != "" {
				head += "unmanaged " + tt.unmanaged + "\n"
			}
			if !strings.HasPrefix(text, head) {
				t.Errorf("output does not start with\n%s\ngot\n%s", head, text)
			}
			for _, f := range statFields {
				has := strings.Contains(text, "\n"+f+" ")
				switch {
				case tt.unmanaged != "" && slices.Contains(policyLines, f) && has:
					t.Errorf("a %s line for a cgroup memcgd would not manage:\n%s", f, text)
				case (tt.unmanaged == "" || !slices.Contains(policyLines, f)) && !has:
					t.Errorf("no %s line in:\n%s", f, text)
				}
			}
			for _, f := range []string{"state", "since", "dry_run"} {
				if strings.Contains(text, "\n"+f+" ") {
					t.Errorf("a %s line without a daemon:\n%s", f, text)
				}
			}

			out, _ := stat(append([]string{"--json"}, tt.args...)...)
			var got []map[string]any
			if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 1 {
				t.Fatalf("stat --json = %s (%v)", out, err)
			}
			e := got[0]
			if e["cgroup"] != tt.cgroup || e["managed"] != (tt.unmanaged == "") || tt.unmanaged != "" && e["unmanaged"] != tt.unmanaged {
				t.Errorf("stat --json: cgroup %v, managed %v, unmanaged %v; want %s, %t, %q", e["cgroup"], e["managed"], e["unmanaged"],
					tt.cgroup, tt.unmanaged == "", tt.unmanaged)
			}
			stats, _ := e["stats"].(map[string]any)
			if _, ok := stats["usage"].(float64); !ok {
				t.Errorf("usage is %#v, want a number of bytes", stats["usage"])
			}
			if wb, ok := stats["writeback_first"]; tt.unmanaged == "" && wb != true || tt.unmanaged != "" && ok {
				t.Errorf("writeback_first is %#v (present %t), want true as the default policy has it, and only where managed", wb, ok)
			}
			if _, ok := e["state"]; ok {
				t.Errorf("stat --json without a daemon has a state: %s", out)
			}
		})
	}

	// With no CGROUP: every cgroup beneath manage.under, / among them,
	// which the default policy does not manage.
	out, _ := stat("--json")
	var all []map[string]any
	if err := json.Unmarshal([]byte(out), &all); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"/": false, string(limited.Path): true, string(unlimited.Path): false}
	for _, e := range all {
		cg, _ := e["cgroup"].(string)
		if m, ok := want[cg]; ok {
			if e["managed"] != m {
				t.Errorf("stat --json: %s managed %v, want %t", cg, e["managed"], m)
			}
			delete(want, cg)
		}
	}
	if len(want) > 0 {
		t.Errorf("stat --json lists %d cgroups, not %v", len(all), want)
	}
}

// limitedAbove reports whether cg or an ancestor below the root has a
// memory limit.
func limitedAbove(t *testing.T, l layout.Layout, cg host.Cgroup) bool {
	t.Helper()
	r := observe.NewReader(l)
	defer r.Close()
	for _, a := range host.Ancestors(cg)[1:] {
		s, err := r.Observe(a)
		if err != nil {
			t.Fatal(err)
		}
		if s.Limit != memcg.NoLimit {
			return true
		}
	}
	return false
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
