package cgroupfs

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
)

// The walk leaves out a threaded cgroup named as a pace group (memcgd's
// own), and keeps a tenant's domain cgroup of that name; on v1, where the
// pace groups are in the cpu hierarchy, it leaves out nothing.
func TestWalkCgroupsLeavesOutPaceGroups(t *testing.T) {
	root := t.TempDir()
	for dir, typ := range map[string]string{
		"a":             "domain",
		"a/memcgd.pace": "threaded",
		"b":             "domain",
		"b/memcgd.pace": "domain", // a tenant's, so named
		"c":             "domain threaded",
	} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dir, "cgroup.type"), []byte(typ+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	all := []host.Cgroup{"/", "/a", "/a/memcgd.pace", "/b", "/b/memcgd.pace", "/c"}
	for _, tc := range []struct {
		version layout.Version
		want    []host.Cgroup
	}{
		{layout.V2, []host.Cgroup{"/", "/a", "/b", "/b/memcgd.pace", "/c"}},
		{layout.V1, all},
	} {
		fs := &FS{layout: layout.Layout{Memory: layout.Hierarchy{Version: tc.version, Mount: root, Root: "/"}}, under: "/"}
		got, err := fs.Cgroups(t.Context())
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%v: Cgroups = %v, %v; want %v", tc.version, got, err, tc.want)
		}
		var walked []host.Cgroup
		err = fs.WalkCgroups(func(cg host.Cgroup) error { walked = append(walked, cg); return nil })
		if err != nil || !slices.Equal(walked, tc.want) {
			t.Errorf("%v: WalkCgroups found %v, %v; want %v", tc.version, walked, err, tc.want)
		}
	}
	// A pace group gone between the listing and the check of its type is
	// a cgroup gone: the step that follows finds it so.
	h := layout.Hierarchy{Version: layout.V2, Mount: root, Root: "/"}
	if paceGroup(h, "/gone/memcgd.pace") {
		t.Error("paceGroup of a vanished directory: true, want false")
	}
}

func TestPaceGroupEvent(t *testing.T) {
	for cg, want := range map[host.Cgroup]bool{
		"/pod/c1/memcgd.pace": true,
		"/pod/c1":             false,
		"/pod/memcgd.pace.x":  false,
		"/pod/memcgd.anchor":  false, // v1 freezer only: never in the memory hierarchy's events
		"/memcgd.pace/child":  false,
	} {
		if got := paceGroupEvent(cg); got != want {
			t.Errorf("paceGroupEvent(%s) = %v, want %v", cg, got, want)
		}
	}
}
