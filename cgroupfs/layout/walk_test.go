package layout_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
)

func TestWalk(t *testing.T) {
	root := cgrouptest.FakeHost(t, map[string]string{
		"m/a/b/c/":             "",
		"m/a/b/memory.stat":    "",
		"m/a/a2/":              "",
		"m/z/":                 "",
		"m/a/cgroup.procs":     "",
		"m/docker/c1/x/":       "",
		"m/docker/c1/y/":       "",
		"m/docker/c10/":        "",
		"m/memory.limit_max":   "",
		"m/a/b/c/cgroup.procs": "",
	})
	whole := layout.Hierarchy{Version: layout.V1, Mount: filepath.Join(root, "m"), Root: "/"}
	container := layout.Hierarchy{Version: layout.V1, Mount: filepath.Join(root, "m/docker/c1"), Root: "/docker/c1"}
	tests := []struct {
		name    string
		h       layout.Hierarchy
		under   host.Cgroup
		want    []host.Cgroup
		wantErr error
	}{{
		name:  "whole hierarchy: parents first, siblings by name, files skipped",
		h:     whole,
		under: "/",
		want:  []host.Cgroup{"/", "/a", "/a/a2", "/a/b", "/a/b/c", "/docker", "/docker/c1", "/docker/c1/x", "/docker/c1/y", "/docker/c10", "/z"},
	}, {
		name:  "a subtree",
		h:     whole,
		under: "/a/b",
		want:  []host.Cgroup{"/a/b", "/a/b/c"},
	}, {
		name:  "a leaf",
		h:     whole,
		under: "/z",
		want:  []host.Cgroup{"/z"},
	}, {
		name:  "a container's mount of its subtree names cgroups by hierarchy path",
		h:     container,
		under: "/docker/c1",
		want:  []host.Cgroup{"/docker/c1", "/docker/c1/x", "/docker/c1/y"},
	}, {
		name:    "a missing subtree has vanished",
		h:       whole,
		under:   "/gone",
		wantErr: host.ErrVanished,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := layout.Walk(tt.h, tt.under)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
	if _, err := layout.Walk(container, "/elsewhere"); err == nil {
		t.Errorf("walk outside the mounted subtree: no error")
	}
}

// On the real kernel, a tree of test cgroups is walked parents first, and
// a removed cgroup is not listed.
func TestWalkRealKernel(t *testing.T) {
	l := cgrouptest.Layout(t)
	top := cgrouptest.New(t, l, 0)
	a := top.Child(t, "a")
	a.Child(t, "a1")
	top.Child(t, "b")
	gone := top.Child(t, "gone")
	if err := os.Remove(gone.Dir); err != nil {
		t.Fatal(err)
	}
	got, err := layout.Walk(l.Memory, top.Path)
	if err != nil {
		t.Fatal(err)
	}
	want := []host.Cgroup{top.Path, top.Path + "/a", top.Path + "/a/a1", top.Path + "/b"}
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
