package cgroupfs

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
)

// The listing leaves out a threaded cgroup named as a pace group (memcgd's
// own), and keeps a tenant's domain cgroup of that name; on v1, where the
// pace groups are in the cpu hierarchy, it leaves out nothing.
func TestWithoutPaceGroups(t *testing.T) {
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
	all := []host.Cgroup{"/", "/a", "/a/memcgd.pace", "/b", "/b/memcgd.pace", "/c", "/gone/memcgd.pace"}
	for _, tc := range []struct {
		version layout.Version
		want    []host.Cgroup
	}{
		{layout.V2, []host.Cgroup{"/", "/a", "/b", "/b/memcgd.pace", "/c", "/gone/memcgd.pace"}},
		{layout.V1, all},
	} {
		h := layout.Hierarchy{Version: tc.version, Mount: root, Root: "/"}
		if got := withoutPaceGroups(h, slices.Clone(all)); !slices.Equal(got, tc.want) {
			t.Errorf("%v: withoutPaceGroups = %v, want %v", tc.version, got, tc.want)
		}
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
