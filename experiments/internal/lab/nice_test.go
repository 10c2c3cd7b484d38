package lab

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The experiments run the daemon at the unit's Nice=, and its autogroup
// at the same nice value for the unit's CPUWeight=, so that their figures
// are those of the daemon as deployed.
func TestDeployNiceIsTheUnits(t *testing.T) {
	b, err := os.ReadFile("../../../deploy/memcgd.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  string
		want int
	}{
		{"Nice=", DeployNice},
		{"CPUWeight=", DeployCPUWeight},
	} {
		got, found := 0, false
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), tc.key)
			if !ok {
				continue
			}
			if got, err = strconv.Atoi(v); err != nil {
				t.Fatalf("deploy/memcgd.service: %s%q: %v", tc.key, v, err)
			}
			found = true
		}
		switch {
		case !found:
			t.Errorf("deploy/memcgd.service sets no %s; the lab runs the daemon at %d", tc.key, tc.want)
		case got != tc.want:
			t.Errorf("deploy/memcgd.service has %s%d, the lab runs the daemon at %d", tc.key, got, tc.want)
		}
	}
}

// TestNiceCommand runs cat(1) on its own /proc/PID/stat under
// niceWrap, with nice(1) on PATH and, as in the test VM, with only sh
// and renice(1) there, and checks the nice value it ran at.
func TestNiceCommand(t *testing.T) {
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Skip("no cat on this host")
	}
	onlyRenice := t.TempDir()
	for _, tool := range []string{"sh", "renice"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("no %s on this host", tool)
		}
		if err := os.Symlink(p, filepath.Join(onlyRenice, tool)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, path string
	}{
		{"nice on PATH", os.Getenv("PATH")},
		{"only sh and renice on PATH", onlyRenice},
	}
	// nice(1) adds to the caller's value, renice sets it: they agree
	// from 0. Positive, so that it needs no privilege.
	if n := niceOf(t, "self"); n != 0 {
		t.Skipf("this test runs at nice %d, want 0", n)
	}
	const want = 3
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("PATH", tt.path)
			argv := append(niceWrap(want), cat, "/proc/self/stat")
			out, err := exec.Command(argv[0], argv[1:]...).Output()
			if err != nil {
				t.Fatalf("niceWrap(%d) cat: %v", want, err)
			}
			if got := statNice(t, string(out)); got != want {
				t.Errorf("cat ran at nice %d, want %d", got, want)
			}
		})
	}
}

// niceOf is the nice value of /proc/<pid>.
func niceOf(t *testing.T, pid string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	return statNice(t, string(b))
}

// statNice is the nice field of a /proc/PID/stat line: the 19th, the 17th
// after the command's closing parenthesis.
func statNice(t *testing.T, stat string) int {
	t.Helper()
	i := strings.LastIndexByte(stat, ')')
	f := strings.Fields(stat[i+1:])
	if i < 0 || len(f) < 17 {
		t.Fatalf("/proc/PID/stat %q: want 52 fields", stat)
	}
	n, err := strconv.Atoi(f[16])
	if err != nil {
		t.Fatalf("/proc/PID/stat nice %q: %v", f[16], err)
	}
	return n
}

// setAutogroupNice sets the nice value of the autogroup of a process in a
// session of its own, and leaves a kernel without autogroups alone.
func TestSetAutogroupNice(t *testing.T) {
	if _, err := os.Stat("/proc/self/autogroup"); err != nil {
		// A kernel without CONFIG_SCHED_AUTOGROUP: nothing to set, and
		// setAutogroupNice must say nothing.
		if err := setAutogroupNice(os.Getpid(), 5); err != nil {
			t.Errorf("setAutogroupNice without autogroups: %v, want nil", err)
		}
		return
	}
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	const want = 7
	if err := setAutogroupNice(cmd.Process.Pid, want); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/autogroup")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); !strings.HasSuffix(got, " nice "+strconv.Itoa(want)) {
		t.Errorf("autogroup of the child: %q, want it at nice %d", got, want)
	}
	self, err := os.ReadFile("/proc/self/autogroup")
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(strings.TrimSpace(string(self)), " nice "+strconv.Itoa(want)) {
		t.Errorf("this test's own autogroup %q was changed too", self)
	}
}
