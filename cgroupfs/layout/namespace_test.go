package layout_test

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
)

// The cgroup lines of mountinfo and /proc/self/cgroup as a shell started
// by `unshare --cgroup --mount` in memory cgroup /a/b of a hybrid host
// (memory on v1, everything else at the root) reads them, kernel 6.18: the
// host's mounts, copied into the new mount namespace, are shown from the
// new cgroup namespace, whose root in the memory hierarchy is /a/b.
const (
	unsharedMountInfo = `47 46 0:28 / $ROOT/sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
51 47 0:32 /../.. $ROOT/sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
53 47 0:34 / $ROOT/sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
57 47 0:38 / $ROOT/sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	unsharedProcCgroup = "6:freezer:/\n4:memory:/\n0::/\n"
)

// The files of the hierarchies' roots on a hybrid host, as far as
// PrivateNamespace looks: release_agent on v1 roots, no cgroup.type nor
// cgroup.events on the v2 root.
var hybridRoots = map[string]string{
	"sys/fs/cgroup/memory/release_agent":       "\n",
	"sys/fs/cgroup/freezer/release_agent":      "\n",
	"sys/fs/cgroup/unified/cgroup.controllers": "\n",
}

func TestPrivateNamespace(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		// ns are the targets of proc/self/ns/cgroup and proc/1/ns/cgroup,
		// "" for a link that cannot be read.
		ns [2]string
		// want are words of each sign, one entry per sign; none for the
		// host's view.
		want [][]string
	}{{
		name: "the host's view: roots with their root-only files, PID 1's namespace",
		files: with(hybridRoots, map[string]string{
			"proc/self/mountinfo": hybridMountInfo,
			"proc/self/cgroup":    hybridProcCgroup,
		}),
		ns: [2]string{"cgroup:[4026531835]", "cgroup:[4026531835]"},
	}, {
		name: "the host's view, PID 1's namespace unreadable",
		files: with(hybridRoots, map[string]string{
			"proc/self/mountinfo": hybridMountInfo,
			"proc/self/cgroup":    hybridProcCgroup,
		}),
		ns: [2]string{"cgroup:[4026531835]", ""},
	}, {
		name: "unshare --cgroup: the host's memory mount shows /../..",
		files: with(hybridRoots, map[string]string{
			"proc/self/mountinfo": unsharedMountInfo,
			"proc/self/cgroup":    unsharedProcCgroup,
		}),
		ns:   [2]string{"cgroup:[4026532178]", "cgroup:[4026531835]"},
		want: [][]string{{"sys/fs/cgroup/memory shows cgroup /../..", "above the namespace's root"}, {"cgroup:[4026532178] is not PID 1's, cgroup:[4026531835]"}},
	}, {
		name: "moved out of its namespace's root after unshare",
		files: with(hybridRoots, map[string]string{
			"proc/self/mountinfo": hybridMountInfo,
			"proc/self/cgroup":    "6:freezer:/\n4:memory:/../sibling\n0::/\n",
		}),
		want: [][]string{{"gives its cgroup as /../sibling"}},
	}, {
		name: "a v2 mount made inside the namespace: its / has cgroup.type",
		files: map[string]string{
			"proc/self/mountinfo":              v2MountInfo,
			"proc/self/cgroup":                 "0::/\n",
			"sys/fs/cgroup/cgroup.controllers": "memory\n",
			"sys/fs/cgroup/cgroup.type":        "domain\n",
		},
		want: [][]string{{"shown as / at", "sys/fs/cgroup is not its hierarchy's root (it has cgroup.type)"}},
	}, {
		name: "a v2 mount made inside the namespace, kernel before 4.14: its / has cgroup.events",
		files: map[string]string{
			"proc/self/mountinfo":              v2MountInfo,
			"proc/self/cgroup":                 "0::/\n",
			"sys/fs/cgroup/cgroup.controllers": "memory\n",
			"sys/fs/cgroup/cgroup.events":      "populated 1\n",
		},
		want: [][]string{{"(it has cgroup.events)"}},
	}, {
		name: "the host's v2 root",
		files: map[string]string{
			"proc/self/mountinfo":              v2MountInfo,
			"proc/self/cgroup":                 "0::/init.scope\n",
			"sys/fs/cgroup/cgroup.controllers": "memory\n",
		},
	}, {
		name: "a v1 memory mount made inside the namespace: its / has no release_agent",
		files: map[string]string{
			"proc/self/mountinfo":               "34 30 0:31 / $ROOT/sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
			"proc/self/cgroup":                  "4:memory:/\n",
			"sys/fs/cgroup/memory/cgroup.procs": "",
		},
		want: [][]string{{"sys/fs/cgroup/memory is not its hierarchy's root (it has no release_agent)"}},
	}, {
		name: "a subtree mount without a namespace: its root is a host path",
		files: map[string]string{
			"proc/self/mountinfo": "34 30 0:31 /docker/c1 $ROOT/sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
			"proc/self/cgroup":    "4:memory:/docker/c1\n",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := cgrouptest.FakeHost(t, tt.files)
			proc := filepath.Join(root, "proc")
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
			l, err := layout.Discover(proc)
			if err != nil {
				t.Fatal(err)
			}
			signs, err := layout.PrivateNamespace(proc, l)
			if err != nil {
				t.Fatal(err)
			}
			if len(signs) != len(tt.want) {
				t.Fatalf("signs %q, want %d", signs, len(tt.want))
			}
			for i, words := range tt.want {
				for _, w := range words {
					if !strings.Contains(signs[i], w) {
						t.Errorf("sign %q does not say %q", signs[i], w)
					}
				}
			}
		})
	}
}

// A hierarchy whose root is above the reader's namespace has no directory
// for any cgroup, nor a cgroup for any directory: "/../.." must not be
// cleaned into "/", which would take the host's root for the namespace's.
func TestDirAboveNamespaceRoot(t *testing.T) {
	h := layout.Hierarchy{Version: layout.V1, Mount: "/sys/fs/cgroup/memory", Root: "/../.."}
	for _, cg := range []string{"/", "/a", "/../..", "/../../a"} {
		if dir := h.Dir(host.Cgroup(cg)); dir != "" {
			t.Errorf("Dir(%q) with root %s = %q, want none", cg, h.Root, dir)
		}
	}
	for _, dir := range []string{h.Mount, h.Mount + "/a"} {
		if cg, err := h.Cgroup(dir); err == nil {
			t.Errorf("Cgroup(%q) with root %s = %q, want an error", dir, h.Root, cg)
		}
	}
}

// with returns the files of a and b together.
func with(a, b map[string]string) map[string]string {
	m := maps.Clone(a)
	maps.Copy(m, b)
	return m
}
