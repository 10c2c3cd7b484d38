package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/control"
	"github.com/memcgd/memcgd/host"
)

// memcgd in a pod's cgroup namespace, as containerd gives every container
// on cgroup v2, on a node whose cgroupfs the pod mounts from the host, in
// the memory cgroup P/memcgd beside P/app (P the test's cgroup): the
// namespace's root is P/memcgd, which it would otherwise take for "/".
// Where PID 1 is in the node's cgroup namespace (hostPID), memcgd joins it
// and names every cgroup by its host path: the subtree it manages, what
// `memcgd stat` lists, and its own cgroup, exempt from throttling and
// reclaim; `memcgd stat` run in such a pod does the same. Where it cannot
// join, it refuses to start (exit status 1), saying what showed the
// namespace, why it could not join, and what to set.
func TestDaemonInPodCgroupNamespace(t *testing.T) {
	l := cgrouptest.Layout(t)
	within := 5 * time.Second * slow()
	parent := cgrouptest.New(t, l, 0)
	home := parent.Child(t, "memcgd")
	app := parent.Child(t, "app")
	var join []string
	for _, dir := range joinDirs(l, home) {
		join = append(join, "-join", dir)
	}
	hostAt := t.TempDir()
	fresh := l.Memory.Mount + ":cgroup2:"
	if l.Memory.Version == layout.V1 {
		fresh = l.Memory.Mount + ":cgroup:memory"
	}
	fix := []string{"hostPID: true", "SYS_ADMIN", "--cgroupns=host"}

	// With the host's /proc, whether memcgd can join depends on the
	// machine: it needs ptrace access to PID 1, which a sandbox may deny.
	hostPID := struct {
		mount   string
		refused []string
	}{mount: l.Memory.Mount}
	own, _ := layout.CgroupNamespace("/proc", "self")
	if pid1, err := layout.CgroupNamespace("/proc", "1"); err != nil {
		hostPID.refused = append([]string{"/proc/1/ns/cgroup", "permission denied"}, fix...)
		t.Logf("this machine's PID 1 is out of reach (%v): with its /proc, memcgd must refuse", err)
	} else if pid1 != own {
		t.Fatalf("this test runs in cgroup namespace %s, PID 1 in %s: the test needs the host's", own, pid1)
	}

	tests := []struct {
		name      string
		node, pod []string
		// onNode: the pod's /proc is that of a PID namespace whose init,
		// in the node's cgroup namespace, is the node helper; otherwise
		// the machine's own (or, with -pid, the pod's).
		onNode bool
		// mount is the memory hierarchy's mount the daemon must use, and
		// refused the words of its refusal when it must refuse.
		mount   string
		refused []string
	}{{
		name: "hostPID on this machine", node: join,
		mount: hostPID.mount, refused: hostPID.refused,
	}, {
		name: "hostPID, the node's cgroupfs at the same place", node: join, onNode: true,
		mount: l.Memory.Mount,
	}, {
		name: "hostPID, the runtime's own cgroup mount, the node's under /host", node: join, onNode: true,
		pod:   []string{"-remount", fresh, "-host-at", hostAt},
		mount: hostAt + l.Memory.Mount,
	}, {
		name: "no hostPID: memcgd is its pod's PID 1", node: append([]string{"-pid"}, join...), pod: []string{"-proc"},
		refused: append([]string{"PID 1 is in the same cgroup namespace", "/proc is not the host's"}, fix...),
	}, {
		name: "hostPID without CAP_SYS_ADMIN", node: join, onNode: true, pod: []string{"-drop-sys-admin"},
		refused: append([]string{"setns", "operation not permitted", "it needs CAP_SYS_ADMIN"}, fix...),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDaemon(t, managedConfig(parent.Path, "dirty_background_bytes: 8M, dirty_bytes: 16M, min_free_kbytes: 0"))
			d.wrap, d.attr = podCommand(tt.node, tt.pod, tt.onNode)
			if tt.refused != nil {
				d.launch()
				err := d.wait(readyTimeout * slow())
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 1 {
					t.Fatalf("memcgd run in the pod: %v, want exit status 1; log:\n%s", err, tail(d.logText(), 30))
				}
				line, ok := d.waitLog(0, 0, "memcgd: memcgd is in a cgroup namespace of its own")
				if !ok {
					t.Fatalf("no refusal naming the cgroup namespace in the log:\n%s", tail(d.logText(), 30))
				}
				t.Log(line)
				for _, w := range append([]string{"the cgroup mount at", "above the namespace's root"}, tt.refused...) {
					if !strings.Contains(line, w) {
						t.Errorf("the refusal does not say %q", w)
					}
				}
				return
			}

			d.start()
			if line, ok := d.waitLog(0, within, "joined PID 1's cgroup namespace"); !ok {
				t.Errorf("no \"joined PID 1's cgroup namespace\" in the log")
			} else {
				t.Log(line)
			}
			line, ok := d.waitLog(0, within, "memcgd running")
			if !ok {
				t.Fatalf("no \"memcgd running\" in the log")
			}
			t.Log(line)
			// self lists the daemon's cgroup in each hierarchy it could
			// freeze through: all at P/memcgd, by host path.
			self := fmt.Sprintf("[%s]", strings.TrimSpace(strings.Repeat(string(home.Path)+" ", len(joinDirs(l, home)))))
			for _, w := range []string{"memory=" + tt.mount, "under=" + string(parent.Path), "self=", self} {
				if !strings.Contains(line, w) {
					t.Errorf("the daemon's \"memcgd running\" line does not say %s", w)
				}
			}
			want := []host.Cgroup{parent.Path, app.Path, home.Path}
			slices.Sort(want)
			if got := managedNames(t, d); !slices.Equal(got, want) {
				t.Errorf("the daemon manages %q, want the host paths %q", got, want)
			}
			for _, c := range []struct {
				cg     host.Cgroup
				exempt uint64
			}{{home.Path, 1}, {parent.Path, 1}, {app.Path, 0}} {
				if got := d.stat(c.cg)["exempt"]; got != c.exempt {
					t.Errorf("memcgd stat %s: exempt %d, want %d (the daemon runs in %s)", c.cg, got, c.exempt, home.Path)
				}
			}

			// memcgd stat in a pod like the daemon's, naming a host path.
			argv, attr := podCommand(tt.node, tt.pod, tt.onNode, d.bin, "stat", "--socket", d.socket, "--json", string(app.Path))
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.SysProcAttr = attr
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			if err := cmd.Run(); err != nil {
				t.Fatalf("memcgd stat %s in the pod: %v: %s", app.Path, err, errOut.String())
			}
			var reports []struct {
				Cgroup host.Cgroup `json:"cgroup"`
			}
			if err := json.Unmarshal(out.Bytes(), &reports); err != nil || len(reports) != 1 || reports[0].Cgroup != app.Path {
				t.Errorf("memcgd stat %s in the pod printed %q (%v), want that cgroup's report alone", app.Path, out.String(), err)
			}
			d.stop()
		})
	}
}

// managedNames lists the cgroups the daemon reports on, sorted.
func managedNames(t *testing.T, d *daemon) []host.Cgroup {
	t.Helper()
	c, err := control.Dial(d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rs, err := c.Stat(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	var names []host.Cgroup
	for _, r := range rs {
		names = append(names, r.Cgroup)
	}
	slices.Sort(names)
	return names
}
