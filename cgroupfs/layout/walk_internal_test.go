package layout

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/memcgd/memcgd/host"
)

// A cgroup removed after its parent was listed, before the walk reaches
// it, is skipped with its subtree; the rest of the walk goes on.
func TestWalkSkipsACgroupVanishingMidWalk(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"a/b/deep", "a/c", "d"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h := Hierarchy{Version: V2, Mount: root, Root: "/"}
	list := func(dir string, add func(string, bool)) error {
		err := listChildren(dir, add)
		if dir == filepath.Join(root, "a") {
			// rmdir of /a/b (and its child) right after /a was listed
			if err := os.RemoveAll(filepath.Join(root, "a/b")); err != nil {
				t.Fatal(err)
			}
		}
		return err
	}
	var got []host.Cgroup
	err := walk(h, "/", list, func(cg host.Cgroup) error {
		got = append(got, cg)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []host.Cgroup{"/", "/a", "/a/c", "/d"}
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
