package layout_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/cgroupfs/observe"
	"github.com/memcgd/memcgd/host"
)

const (
	hybridMountInfo = `30 22 0:27 / $ROOT/sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
34 30 0:31 / $ROOT/sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 30 0:33 / $ROOT/sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 30 0:36 / $ROOT/sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
40 30 0:37 / $ROOT/sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	hybridProcCgroup = "6:freezer:/\n4:memory:/process_api/x\n0::/\n"
	v2MountInfo      = "25 22 0:21 / $ROOT/sys/fs/cgroup rw,relatime - cgroup2 none rw\n"
)

func TestDiscover(t *testing.T) {
	tests := []struct {
		name        string
		files       map[string]string
		wantMemory  layout.Hierarchy // Mount relative to the fake root
		wantUnified string           // mount point, "" for none
		wantFreezer string
		wantErr     string
	}{{
		name: "hybrid: memory on v1, unified without controllers, v1 freezer",
		files: map[string]string{
			"proc/self/mountinfo":                      hybridMountInfo,
			"sys/fs/cgroup/unified/cgroup.controllers": "hugetlb\n",
		},
		wantMemory:  layout.Hierarchy{Version: layout.V1, Mount: "/sys/fs/cgroup/memory", Root: "/"},
		wantUnified: "/sys/fs/cgroup/unified",
		wantFreezer: "/sys/fs/cgroup/freezer",
	}, {
		name: "v2: cgroup.controllers lists memory",
		files: map[string]string{
			"proc/self/mountinfo":              v2MountInfo,
			"sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory hugetlb pids rdma misc\n",
		},
		wantMemory:  layout.Hierarchy{Version: layout.V2, Mount: "/sys/fs/cgroup", Root: "/"},
		wantUnified: "/sys/fs/cgroup",
	}, {
		name: "v1 only",
		files: map[string]string{
			"proc/self/mountinfo": "34 30 0:31 / $ROOT/cg/memory rw - cgroup cgroup rw,memory,cpu\n",
		},
		wantMemory: layout.Hierarchy{Version: layout.V1, Mount: "/cg/memory", Root: "/"},
	}, {
		name: "a mount of the whole hierarchy wins over a container's bind mount of a subtree",
		files: map[string]string{
			"proc/self/mountinfo": "34 30 0:31 /docker/c1 $ROOT/c1 rw - cgroup cgroup rw,memory\n" +
				"35 30 0:31 / $ROOT/all rw - cgroup cgroup rw,memory\n",
		},
		wantMemory: layout.Hierarchy{Version: layout.V1, Mount: "/all", Root: "/"},
	}, {
		name: "a container sees only its subtree",
		files: map[string]string{
			"proc/self/mountinfo": "34 30 0:31 /docker/c1 $ROOT/sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
		},
		wantMemory: layout.Hierarchy{Version: layout.V1, Mount: "/sys/fs/cgroup/memory", Root: "/docker/c1"},
	}, {
		name: "no memory controller anywhere",
		files: map[string]string{
			"proc/self/mountinfo":              v2MountInfo,
			"sys/fs/cgroup/cgroup.controllers": "cpu io\n",
		},
		wantErr: "no memory controller mounted",
	}, {
		name: "an unreadable cgroup.controllers",
		files: map[string]string{
			"proc/self/mountinfo": v2MountInfo,
		},
		wantErr: "cgroup.controllers",
	}, {
		name:    "no mountinfo",
		files:   map[string]string{"proc/self/": ""},
		wantErr: "mountinfo",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := cgrouptest.FakeHost(t, tt.files)
			l, err := layout.Discover(filepath.Join(root, "proc"))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tt.wantMemory
			want.Mount = root + want.Mount
			if l.Memory != want {
				t.Errorf("Memory = %+v, want %+v", l.Memory, want)
			}
			for _, h := range []struct {
				what string
				got  *layout.Hierarchy
				want string
			}{{"Unified", l.Unified, tt.wantUnified}, {"Freezer", l.Freezer, tt.wantFreezer}} {
				switch {
				case h.want == "" && h.got != nil:
					t.Errorf("%s = %+v, want none", h.what, *h.got)
				case h.want != "" && (h.got == nil || h.got.Mount != root+h.want):
					t.Errorf("%s = %+v, want mount %s", h.what, h.got, root+h.want)
				}
			}
		})
	}
}

func TestSelf(t *testing.T) {
	v1 := layout.Layout{Memory: layout.Hierarchy{Version: layout.V1, Mount: "/m", Root: "/"}}
	v2 := layout.Layout{Memory: layout.Hierarchy{Version: layout.V2, Mount: "/u", Root: "/"}}
	tests := []struct {
		name    string
		cgroup  string
		layout  layout.Layout
		want    host.Cgroup
		wantErr string
	}{
		{name: "v1: the line naming memory", cgroup: hybridProcCgroup, layout: v1, want: "/process_api/x"},
		{name: "v2: the 0:: line", cgroup: "0::/a/b\n", layout: v2, want: "/a/b"},
		{name: "v2 ignores v1 lines", cgroup: "4:memory:/v1\n0::/v2\n", layout: v2, want: "/v2"},
		{name: "v1 without a memory line", cgroup: "0::/\n", layout: v1, wantErr: "no line for the memory controller"},
		{name: "v2 without a 0:: line", cgroup: "4:memory:/\n", layout: v2, wantErr: "no unified (0::) line"},
		{name: "malformed", cgroup: "memory\n", layout: v1, wantErr: `cgroup line 1 "memory"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := cgrouptest.FakeHost(t, map[string]string{"proc/self/cgroup": tt.cgroup})
			got, err := layout.Self(filepath.Join(root, "proc"), tt.layout)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v, want %q", got, err, tt.want)
			}
		})
	}
}

func TestHierarchyDirAndCgroup(t *testing.T) {
	whole := layout.Hierarchy{Version: layout.V1, Mount: "/sys/fs/cgroup/memory", Root: "/"}
	sub := layout.Hierarchy{Version: layout.V1, Mount: "/sys/fs/cgroup/memory", Root: "/docker/c1"}
	tests := []struct {
		name string
		h    layout.Hierarchy
		cg   host.Cgroup
		dir  string // "" when cg has no directory
	}{
		{"root", whole, "/", "/sys/fs/cgroup/memory"},
		{"descendant", whole, "/a/b", "/sys/fs/cgroup/memory/a/b"},
		{"subtree mount: its root", sub, "/docker/c1", "/sys/fs/cgroup/memory"},
		{"subtree mount: beneath it", sub, "/docker/c1/x", "/sys/fs/cgroup/memory/x"},
		{"subtree mount: a sibling with a common prefix is outside", sub, "/docker/c10", ""},
		{"subtree mount: the hierarchy root is outside", sub, "/", ""},
		{"a relative path has no directory", whole, "a", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.h.Dir(tt.cg)
			if dir != tt.dir {
				t.Fatalf("Dir(%q) = %q, want %q", tt.cg, dir, tt.dir)
			}
			if dir == "" {
				return
			}
			back, err := tt.h.Cgroup(dir)
			if err != nil || back != tt.cg {
				t.Errorf("Cgroup(%q) = %q, %v, want %q", dir, back, err, tt.cg)
			}
		})
	}
	for _, dir := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/memory2", "/tmp", "relative"} {
		if cg, err := whole.Cgroup(dir); err == nil {
			t.Errorf("Cgroup(%q) = %q, want an error: not inside the mount", dir, cg)
		}
	}
}

func TestResolve(t *testing.T) {
	root := cgrouptest.FakeHost(t, map[string]string{
		"memory/a/b/":                 "",
		"memory/a/memory.stat":        "cache 0\n",
		"unified/a/b/":                "",
		"freezer/a/":                  "",
		"memory/notes/not-a-cgroup":   "x",
		"memory/a/b/memory.limit_max": "0",
	})
	l := layout.Layout{
		Memory:  layout.Hierarchy{Version: layout.V1, Mount: filepath.Join(root, "memory"), Root: "/"},
		Unified: &layout.Hierarchy{Version: layout.V2, Mount: filepath.Join(root, "unified"), Root: "/"},
		Freezer: &layout.Hierarchy{Version: layout.V1, Mount: filepath.Join(root, "freezer"), Root: "/"},
	}
	tests := []struct {
		arg     string
		want    host.Cgroup
		wantErr string
	}{
		{arg: "/a/b", want: "/a/b"},
		{arg: "/a/b/", want: "/a/b"},
		{arg: "/", want: "/"},
		{arg: l.Memory.Mount + "/a", want: "/a"},
		{arg: l.Memory.Mount, want: "/"},
		{arg: "/nope", wantErr: `cgroup "/nope": stat ` + l.Memory.Mount + "/nope: no such file or directory; want a cgroup path such as /a/b or a directory under " + l.Memory.Mount},
		{arg: "a/b", wantErr: `cgroup "a/b": want a cgroup path such as /a/b or a directory under`},
		{arg: "", wantErr: `cgroup "": want`},
		{arg: l.Memory.Mount + "/notes/not-a-cgroup", wantErr: "is not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.arg, func(t *testing.T) {
			got, err := l.Resolve(tt.arg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v, want %q", got, err, tt.want)
			}
		})
	}

	for _, tt := range []struct {
		cg                   host.Cgroup
		unified, freezer     string
		hasUnified, hasFrzer bool
	}{
		{"/a/b", filepath.Join(root, "unified/a/b"), "", true, false},
		{"/a", filepath.Join(root, "unified/a"), filepath.Join(root, "freezer/a"), true, true},
		{"/c", "", "", false, false},
	} {
		if d, ok := l.UnifiedDir(tt.cg); d != tt.unified || ok != tt.hasUnified {
			t.Errorf("UnifiedDir(%s) = %q, %v, want %q, %v", tt.cg, d, ok, tt.unified, tt.hasUnified)
		}
		if d, ok := l.FreezerDir(tt.cg); d != tt.freezer || ok != tt.hasFrzer {
			t.Errorf("FreezerDir(%s) = %q, %v, want %q, %v", tt.cg, d, ok, tt.freezer, tt.hasFrzer)
		}
	}
}

// On the real kernel, the process's own memory cgroup resolves to a
// directory that has the memory files of its version (memory.pressure is
// left out: PSI may be off), and Observe reads it. The v2 root cgroup, where processes of a test VM run, lacks the
// usage, limit and event files (mm/memcontrol.c, memory_files[]:
// CFTYPE_NOT_ON_ROOT); Observe relies on their absence there.
func TestDiscoverRealKernel(t *testing.T) {
	l := cgrouptest.Layout(t)
	self, err := layout.Self("/proc", l)
	if err != nil {
		t.Fatal(err)
	}
	cg, err := l.Resolve(string(self))
	if err != nil {
		t.Fatal(err)
	}
	var present, absent []string
	switch {
	case l.Memory.Version == layout.V1:
		present = []string{"memory.usage_in_bytes", "memory.limit_in_bytes", "memory.stat", "memory.failcnt"}
	case cg == "/":
		present = []string{"memory.stat"}
		absent = []string{"memory.current", "memory.max", "memory.high", "memory.events"}
	default:
		present = []string{"memory.current", "memory.max", "memory.high", "memory.stat", "memory.events"}
	}
	dir := l.Memory.Dir(cg)
	for _, f := range present {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("own memory cgroup %s on %s: %v", cg, l.Memory.Version, err)
		}
	}
	for _, f := range absent {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("own memory cgroup %s on %s: %s: %v, want it absent", cg, l.Memory.Version, f, err)
		}
	}
	if _, err := observe.NewReader(l).Observe(cg); err != nil {
		t.Errorf("Observe(%s): %v", cg, err)
	}
	if l.Unified != nil {
		if _, ok := l.UnifiedDir("/"); !ok {
			t.Errorf("UnifiedDir(/) not found under %s", l.Unified.Mount)
		}
	}
}
