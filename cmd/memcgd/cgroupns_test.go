package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
)

// In the host's cgroup namespace hostLayout is Discover. With the signs
// of a namespace of its own and no way to join the host's, memcgd refuses,
// naming what it saw, why it cannot join and the fix; it never goes on
// with the namespace's paths. (The join itself, setns and the new
// execution, is tested on the real kernel: test/daemon,
// TestDaemonInPodCgroupNamespace.)
func TestHostLayout(t *testing.T) {
	const (
		hostMounts = "35 31 0:32 / $ROOT/sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
		// The host's memory mount seen from a namespace rooted two
		// levels down.
		podMounts = "51 47 0:32 /../.. $ROOT/sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
	)
	fix := []string{"hostPID: true", "SYS_ADMIN", "--cgroupns=host"}
	tests := []struct {
		name    string
		mounts  string
		ns      [2]string // targets of proc/self/ns/cgroup and proc/1/ns/cgroup, "" for none
		joined  bool      // started again after a join
		wantErr []string
	}{
		{name: "the host's namespace", mounts: hostMounts, ns: [2]string{"cgroup:[1]", "cgroup:[1]"}},
		{name: "the host's namespace, PID 1's out of reach", mounts: hostMounts, ns: [2]string{"cgroup:[1]", ""}},
		{name: "a pod without hostPID: PID 1 shares the namespace", mounts: podMounts, ns: [2]string{"cgroup:[2]", "cgroup:[2]"},
			wantErr: append([]string{"memcgd is in a cgroup namespace of its own", "/sys/fs/cgroup/memory shows cgroup /../..",
				"cannot join the host's: PID 1 is in the same cgroup namespace, cgroup:[2]: /proc is not the host's"}, fix...)},
		{name: "PID 1's namespace out of reach", mounts: podMounts, ns: [2]string{"cgroup:[2]", ""},
			wantErr: append([]string{"cannot join the host's: PID 1's cgroup namespace: readlink"}, fix...)},
		{name: "still a namespace of its own after the join", mounts: podMounts, ns: [2]string{"cgroup:[1]", "cgroup:[1]"}, joined: true,
			wantErr: append([]string{"memcgd joined PID 1's cgroup namespace and still sees them: PID 1 is not the host's init"}, fix...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := cgrouptest.FakeHost(t, map[string]string{
				"proc/self/mountinfo":                hostMounts,
				"proc/self/cgroup":                   "4:memory:/\n",
				"sys/fs/cgroup/memory/release_agent": "\n",
			})
			proc := filepath.Join(root, "proc")
			if err := os.WriteFile(filepath.Join(proc, "self", "mountinfo"), []byte(strings.ReplaceAll(tt.mounts, "$ROOT", root)), 0o644); err != nil {
				t.Fatal(err)
			}
			for i, pid := range []string{"self", "1"} {
				if tt.ns[i] == "" {
					continue
				}
				dir := filepath.Join(proc, pid, "ns")
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(tt.ns[i], filepath.Join(dir, "cgroup")); err != nil {
					t.Fatal(err)
				}
			}
			if tt.joined {
				t.Setenv(joinedEnv, "cgroup:[2]")
			} else {
				// Unset for the test, and restored after it.
				t.Setenv(joinedEnv, "")
				os.Unsetenv(joinedEnv)
			}
			l, err := hostLayout(proc, nil)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				if want := filepath.Join(root, "sys/fs/cgroup/memory"); l.Memory.Mount != want || l.Memory.Root != "/" {
					t.Errorf("memory hierarchy %+v, want the host's at %s", l.Memory, want)
				}
				return
			}
			if err == nil {
				t.Fatalf("got layout %+v, want a refusal", l)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if _, set := os.LookupEnv(joinedEnv); set {
				t.Errorf("%s is still set: a process memcgd started would take itself for joined", joinedEnv)
			}
		})
	}
}

// A config whose manage.under is missing is refused with the config file's
// name; auto resolves against the memory hierarchy.
func TestLoadConfigIn(t *testing.T) {
	root := cgrouptest.FakeHost(t, map[string]string{
		"proc/self/mountinfo":                 "35 31 0:32 / $ROOT/memory rw - cgroup cgroup rw,memory\n",
		"proc/self/cgroup":                    "4:memory:/system.slice/memcgd.service\n",
		"memory/release_agent":                "\n",
		"memory/kubepods.slice/cgroup.procs":  "",
		"memory/system.slice/memcgd.service/": "",
		"etc/missing.yaml":                    "version: 1\nmanage: {under: /kubepods}\n",
		"etc/auto.yaml":                       "version: 1\nmanage: {under: auto}\n",
	})
	l, err := hostLayout(filepath.Join(root, "proc"), nil)
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(root, "etc/missing.yaml")
	_, err = loadConfigIn(missing, l)
	want := missing + ": config: manage.under: /kubepods does not exist; /kubepods.slice does (systemd cgroup driver): set manage.under to it"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("manage.under /kubepods: %v, want %q", err, want)
	}
	cfg, err := loadConfigIn(filepath.Join(root, "etc/auto.yaml"), l)
	if err != nil || cfg.Under != "/kubepods.slice" {
		t.Errorf("manage.under auto: %+v, %v; want /kubepods.slice", cfg, err)
	}
}
