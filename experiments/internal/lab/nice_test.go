package lab

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The experiments run the daemon at the unit's Nice=, so that their
// figures are those of the daemon as deployed.
func TestDeployNiceIsTheUnits(t *testing.T) {
	f, err := os.Open("../../../deploy/memcgd.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "Nice=")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("deploy/memcgd.service: Nice=%q: %v", v, err)
		}
		if n != DeployNice {
			t.Errorf("deploy/memcgd.service has Nice=%d, lab.DeployNice is %d", n, DeployNice)
		}
		return
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Errorf("deploy/memcgd.service sets no Nice=; lab.DeployNice is %d", DeployNice)
}

// TestNiceCommand runs cat(1) on its own /proc/PID/stat through
// niceCommand, with nice(1) on PATH and, as in the test VM, with only sh
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
			out, err := niceCommand(want, cat, []string{"/proc/self/stat"}).Output()
			if err != nil {
				t.Fatalf("niceCommand(%d, cat): %v", want, err)
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
