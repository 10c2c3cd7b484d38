// Package deploy holds the systemd unit and the Kubernetes DaemonSet; its
// tests check that the capabilities they grant are the ones the daemon
// needs, by running the daemon under the unit's bounding set.
package deploy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/dirtytrack"
)

// unitPath is the unit under test; MEMCGD_UNIT points the test at another
// one (an older unit, to see the test fail).
func unitPath() string {
	if p := os.Getenv("MEMCGD_UNIT"); p != "" {
		return p
	}
	return "memcgd.service"
}

// unit is what the test reads of a systemd unit's [Service] section.
type unit struct {
	bounding, ambient []string // capability names, lower case without "cap_"
	noNewPrivs        bool
	env               map[string]string // Environment=
}

// parseUnit reads CapabilityBoundingSet, AmbientCapabilities and
// NoNewPrivileges as systemd.exec(5) defines them: space-separated
// capability names, several lines adding up, an empty assignment
// resetting; and Environment's space-separated KEY=VALUE assignments
// (unquoted: the test reads no quoting).
func parseUnit(b []byte) (unit, error) {
	var u unit
	sc := bufio.NewScanner(bytes.NewReader(b))
	section := ""
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok || section != "[Service]" {
			continue
		}
		var list *[]string
		switch strings.TrimSpace(key) {
		case "Environment":
			for _, a := range strings.Fields(val) {
				k, v, ok := strings.Cut(a, "=")
				if !ok || strings.ContainsAny(a, `"'`) {
					return u, fmt.Errorf("line %d: Environment: invalid value %q: want unquoted KEY=VALUE", n, a)
				}
				if u.env == nil {
					u.env = map[string]string{}
				}
				u.env[k] = v
			}
			continue
		case "CapabilityBoundingSet":
			list = &u.bounding
		case "AmbientCapabilities":
			list = &u.ambient
		case "NoNewPrivileges":
			switch strings.ToLower(strings.TrimSpace(val)) {
			case "1", "yes", "y", "true", "t", "on":
				u.noNewPrivs = true
			case "0", "no", "n", "false", "f", "off":
				u.noNewPrivs = false
			default:
				return u, fmt.Errorf("line %d: NoNewPrivileges: invalid value %q: allowed a systemd boolean", n, val)
			}
			continue
		default:
			continue
		}
		fields := strings.Fields(val)
		if len(fields) == 0 {
			*list = nil
			continue
		}
		for _, f := range fields {
			if strings.HasPrefix(f, "~") {
				return u, fmt.Errorf("line %d: %s: inverted lists (~) are not read by this test", n, key)
			}
			name, ok := strings.CutPrefix(strings.ToLower(f), "cap_")
			if !ok {
				return u, fmt.Errorf("line %d: %s: invalid value %q: want CAP_ names", n, key, f)
			}
			*list = append(*list, name)
		}
	}
	return u, sc.Err()
}

func readUnit(t *testing.T) unit {
	t.Helper()
	b, err := os.ReadFile(unitPath())
	if err != nil {
		t.Fatal(err)
	}
	u, err := parseUnit(b)
	if err != nil {
		t.Fatalf("%s: %v", unitPath(), err)
	}
	if len(u.bounding) == 0 {
		t.Fatalf("%s: no CapabilityBoundingSet", unitPath())
	}
	return u
}

// The DaemonSet grants the unit's capabilities, no more and no fewer.
func TestDaemonSetGrantsTheUnitsCapabilities(t *testing.T) {
	u := readUnit(t)
	b, err := os.ReadFile("daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	found := false
	for {
		var doc struct {
			Kind string `yaml:"kind"`
			Spec struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Name            string `yaml:"name"`
							SecurityContext struct {
								Privileged   *bool `yaml:"privileged"`
								Capabilities struct {
									Drop []string `yaml:"drop"`
									Add  []string `yaml:"add"`
								} `yaml:"capabilities"`
							} `yaml:"securityContext"`
						} `yaml:"containers"`
					} `yaml:"spec"`
				} `yaml:"template"`
			} `yaml:"spec"`
		}
		if err := dec.Decode(&doc); err != nil {
			break
		}
		if doc.Kind != "DaemonSet" {
			continue
		}
		for _, c := range doc.Spec.Template.Spec.Containers {
			found = true
			sc := c.SecurityContext
			if sc.Privileged == nil || *sc.Privileged {
				t.Errorf("container %s: privileged, want privileged: false and the unit's capabilities", c.Name)
			}
			if !slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) {
				t.Errorf("container %s: drops %v, want [ALL]", c.Name, sc.Capabilities.Drop)
			}
			var add []string
			for _, a := range sc.Capabilities.Add {
				add = append(add, strings.ToLower(a))
			}
			if want := slices.Sorted(slices.Values(u.bounding)); !slices.Equal(slices.Sorted(slices.Values(add)), want) {
				t.Errorf("container %s: adds %v, want the unit's bounding set %v", c.Name, add, want)
			}
		}
	}
	if !found {
		t.Fatal("daemonset.yaml: no DaemonSet container")
	}
}

// Defect 5: the daemon run under the unit's capabilities (bounding set,
// ambient set, no_new_privs, as root, with setpriv from util-linux) starts,
// finds and watches the cgroups it manages, answers `memcgd stat`, lacks no
// capability it uses (it warns of any at start), and undoes everything on
// SIGTERM. With the unit of 5e712c6 (no CAP_SYS_ADMIN, CAP_SYS_RESOURCE,
// CAP_BPF, CAP_PERFMON) it fails:
//
//	git show 5e712c6:deploy/memcgd.service >/tmp/old.service
//	MEMCGD_UNIT=/tmp/old.service go test ./deploy -run TestDaemonRunsUnderTheUnitsCapabilities
func TestDaemonRunsUnderTheUnitsCapabilities(t *testing.T) {
	l := cgrouptest.Layout(t) // root and cgroupfs, or skip (fail with CI=true)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("setpriv (util-linux) not found: %v", err)
		}
		t.Skipf("setpriv (util-linux) not found: %v", err)
	}
	u := readUnit(t)
	// What this test process cannot grant (a sandbox may hold back a
	// capability from its own bounding set) is left out and said so.
	own := capSet(t, os.Getpid(), "CapBnd:")
	var absent []string
	u.bounding = slices.DeleteFunc(u.bounding, func(n string) bool {
		if !slices.Contains(own, n) {
			absent = append(absent, n)
			return true
		}
		return false
	})
	if len(absent) > 0 {
		t.Logf("this environment's bounding set lacks %v: the daemon runs without it, and its warning for it is expected", absent)
	}
	// A kernel that refuses the tracker's fentry programs to root too (a
	// locked-down one) refuses them to the unit: the daemon's line that
	// it counts no levels, with the kernel's EPERM, is expected then.
	tr := cgrouptest.LoadTrackerOptions(t, dirtytrack.Options{Levels: true})
	levelsRefused := !tr.CountsLevels()
	tr.Close()
	if levelsRefused {
		t.Logf("this kernel refuses the level programs to root: %s", tr.NoLevels())
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "memcgd")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/memcgd").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cg := cgrouptest.New(t, l, 256<<20)
	child := cg.Child(t, "tenant")
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, "version: 1\nmanage: {under: %s, limited_only: true}\n", cg.Path), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "control.sock")
	// A free loopback port for the metrics endpoint: bound, then freed.
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := free.Addr().String()
	free.Close()

	caps := func(names []string) string {
		s := "-all"
		for _, n := range names {
			s += ",+" + n
		}
		return s
	}
	args := []string{"--bounding-set", caps(u.bounding), "--inh-caps", caps(u.ambient), "--ambient-caps", caps(u.ambient)}
	if u.noNewPrivs {
		args = append(args, "--no-new-privs")
	}
	args = append(args, "--", bin, "run", "--config", config, "--socket", sock, "--listen", endpoint,
		"--journal", filepath.Join(dir, "journal"), "--overrides", filepath.Join(dir, "overrides.json"))
	d := exec.Command(setpriv, args...)
	var log syncBuffer
	d.Stderr = &log
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- d.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			d.Process.Kill()
			<-exited
		}
	}()

	// Start and discover: `memcgd stat` through the socket lists both.
	var stat string
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Only once the socket exists: without a daemon, stat would read
		// cgroupfs itself and list the cgroups all the same.
		if _, err := os.Stat(sock); err != nil {
			select {
			case err := <-exited:
				stopped = true
				t.Fatalf("the daemon exited under the unit's capabilities: %v\n%s", err, log.String())
			case <-time.After(100 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("no control socket after 30 s\n%s", log.String())
			}
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		out, err := exec.CommandContext(ctx, bin, "stat", "--socket", sock).Output()
		cancel()
		stat = string(out)
		if err == nil && strings.Contains(stat, "cgroup "+string(child.Path)+"\n") {
			break
		}
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("the daemon exited under the unit's capabilities: %v\n%s", err, log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("memcgd stat does not list %s after 30 s: %v\n%s\nlog:\n%s", child.Path, err, stat, log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, want := range []string{"cgroup " + string(cg.Path) + "\n", "\ndirty_thresh ", "\nlow_wmark "} {
		if !strings.Contains(stat, want) {
			t.Errorf("memcgd stat: no %q in\n%s", strings.TrimSpace(want), stat)
		}
	}

	// The probes' endpoints and the daemon's own families: ready once
	// the first scan listed the cgroups (which stat just showed), the
	// journal healthy, the config loaded.
	for path, want := range map[string][]string{
		"/healthz": {"ok\n"},
		"/readyz":  {"ok\n"},
		"/metrics": {"\nmemcgd_build_info{", "\nmemcgd_journal_healthy 1\n", "\nmemcgd_config_last_reload_successful 1\n",
			`memcgd_cgroup_usage_bytes{cgroup="` + string(child.Path) + `"}`},
	} {
		resp, err := http.Get("http://" + endpoint + path)
		if err != nil {
			t.Errorf("GET %s: %v", path, err)
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d %v\n%s", path, resp.StatusCode, err, body)
		}
		for _, w := range want {
			if !strings.Contains(string(body), w) {
				t.Errorf("GET %s: no %q in\n%s", path, w, body)
			}
		}
	}

	pid := d.Process.Pid // setpriv execs the daemon: same PID
	// The capabilities reach the daemon: its effective set is the
	// unit's bounding set.
	eff := capSet(t, pid, "CapEff:")
	for _, n := range u.bounding {
		if !slices.Contains(eff, n) {
			t.Errorf("the daemon lacks %s, which the unit grants", n)
		}
	}
	for _, n := range eff {
		if !slices.Contains(u.bounding, n) {
			t.Errorf("the daemon holds %s, outside the unit's bounding set", n)
		}
	}
	// Watch: it holds an event source for the managed cgroups (an eventfd
	// on v1, their memory.events or memory.pressure on v2).
	for start := time.Now(); !watching(t, pid, l.Memory.Dir(cg.Path)); time.Sleep(100 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Errorf("the daemon holds no watch of %s after 10 s", cg.Path)
			break
		}
	}

	if err := d.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, log.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the daemon did not exit 20 s after SIGTERM\n%s", log.String())
	}
	for _, line := range strings.Split(log.String(), "\n") {
		expected := false
		for _, n := range absent {
			expected = expected || strings.Contains(line, "capability=CAP_"+strings.ToUpper(n)+" ")
		}
		expected = expected || levelsRefused && strings.Contains(line, "no dirty+writeback level counts")
		if !expected && (strings.Contains(line, "level=ERROR") || strings.Contains(line, "missing capability") || strings.Contains(line, "operation not permitted")) {
			t.Errorf("daemon log: %s", line)
		}
	}
}

// capNames are the capability numbers of include/uapi/linux/capability.h
// the test may meet.
var capNames = map[int]string{
	0: "chown", 1: "dac_override", 2: "dac_read_search", 3: "fowner", 4: "fsetid", 5: "kill",
	6: "setgid", 7: "setuid", 8: "setpcap", 9: "linux_immutable", 10: "net_bind_service",
	11: "net_broadcast", 12: "net_admin", 13: "net_raw", 14: "ipc_lock", 15: "ipc_owner",
	16: "sys_module", 17: "sys_rawio", 18: "sys_chroot", 19: "sys_ptrace", 20: "sys_pacct",
	21: "sys_admin", 22: "sys_boot", 23: "sys_nice", 24: "sys_resource", 25: "sys_time",
	26: "sys_tty_config", 27: "mknod", 28: "lease", 29: "audit_write", 30: "audit_control",
	31: "setfcap", 32: "mac_override", 33: "mac_admin", 34: "syslog", 35: "wake_alarm",
	36: "block_suspend", 37: "audit_read", 38: "perfmon", 39: "bpf", 40: "checkpoint_restore",
}

// capSet returns the names in one of pid's capability sets, the line of
// /proc/PID/status that starts with field ("CapEff:", "CapBnd:").
func capSet(t *testing.T, pid int, field string) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			v, err := strconv.ParseUint(strings.TrimSpace(rest), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for bit := range 64 {
				if v&(1<<bit) != 0 {
					name, ok := capNames[bit]
					if !ok {
						name = fmt.Sprintf("cap_%d", bit)
					}
					out = append(out, name)
				}
			}
			return out
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return nil
}

// watching reports whether pid holds an eventfd or a file under dir.
func watching(t *testing.T, pid int, dir string) bool {
	t.Helper()
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		link, err := os.Readlink(filepath.Join(fdDir, e.Name()))
		if err == nil && (link == "anon_inode:[eventfd]" || strings.HasPrefix(link, dir+"/")) {
			return true
		}
	}
	return false
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
