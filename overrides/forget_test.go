package overrides

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memcgd/memcgd/host"
)

// fakeCgroups is a hierarchy of directories under a temporary root, so
// that DirInode reads real inode numbers: removing and creating a
// directory again gives it a new one, as kernfs does.
type fakeCgroups struct{ root string }

func (f fakeCgroups) dir(cg host.Cgroup) string { return filepath.Join(f.root, string(cg)) }

func (f fakeCgroups) mkdir(t *testing.T, cg host.Cgroup) {
	t.Helper()
	if err := os.MkdirAll(f.dir(cg), 0o755); err != nil {
		t.Fatal(err)
	}
}

func (f fakeCgroups) rmdir(t *testing.T, cg host.Cgroup) {
	t.Helper()
	if err := os.Remove(f.dir(cg)); err != nil {
		t.Fatal(err)
	}
}

// recreate removes cg and creates it again until its inode differs (tmpfs
// and ext4 may hand the freed number straight back; kernfs does not).
func (f fakeCgroups) recreate(t *testing.T, cg host.Cgroup) {
	t.Helper()
	before, err := DirInode(f.dir)(cg)
	if err != nil {
		t.Fatal(err)
	}
	hold := f.dir(cg) + ".old"
	if err := os.Rename(f.dir(cg), hold); err != nil { // keeps the old inode in use
		t.Fatal(err)
	}
	f.mkdir(t, cg)
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	if after, _ := DirInode(f.dir)(cg); after == before {
		t.Fatalf("recreated %s has the same inode %d", cg, after)
	}
}

func TestForget(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, f fakeCgroups)
		want   []host.Cgroup // cgroups with overrides after Forget("/a")
	}{
		{"cgroup removed: its overrides are collected", func(t *testing.T, f fakeCgroups) { f.rmdir(t, "/a") }, []host.Cgroup{"/b"}},
		{"cgroup recreated under the same name: collected", func(t *testing.T, f fakeCgroups) { f.recreate(t, "/a") }, []host.Cgroup{"/b"}},
		{"cgroup still there (a false alarm): kept", func(t *testing.T, f fakeCgroups) {}, []host.Cgroup{"/a", "/b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fakeCgroups{root: t.TempDir()}
			f.mkdir(t, "/a")
			f.mkdir(t, "/b")
			path := filepath.Join(t.TempDir(), "overrides.json")
			o, err := Load(path, DirInode(f.dir))
			if err != nil {
				t.Fatal(err)
			}
			for _, cg := range []host.Cgroup{"/a", "/b"} {
				if err := o.Set(cg, map[string]string{"dirty_ratio": "15"}); err != nil {
					t.Fatal(err)
				}
			}
			tt.change(t, f)
			if err := o.Forget("/a"); err != nil {
				t.Fatal(err)
			}
			if got := o.Cgroups(); !slices.Equal(got, tt.want) {
				t.Errorf("after Forget(/a): Cgroups() = %v, want %v", got, tt.want)
			}
			again, err := Load(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := again.Cgroups(); !slices.Equal(got, tt.want) {
				t.Errorf("on disk after Forget(/a): %v, want %v", got, tt.want)
			}
		})
	}
}

// A cgroup removed or recreated while no daemon ran: Load notices by the
// identity recorded at Set and drops its overrides, so that the new cgroup
// starts from the configuration.
func TestLoadDropsStale(t *testing.T) {
	f := fakeCgroups{root: t.TempDir()}
	for _, cg := range []host.Cgroup{"/kept", "/removed", "/recreated"} {
		f.mkdir(t, cg)
	}
	path := filepath.Join(t.TempDir(), "overrides.json")
	o, err := Load(path, DirInode(f.dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, cg := range []host.Cgroup{"/kept", "/removed", "/recreated"} {
		if err := o.Set(cg, map[string]string{"dirty_bytes": "16M"}); err != nil {
			t.Fatal(err)
		}
	}
	f.rmdir(t, "/removed")
	f.recreate(t, "/recreated")

	again, err := Load(path, DirInode(f.dir))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := again.Cgroups(), []host.Cgroup{"/kept"}; !slices.Equal(got, want) {
		t.Errorf("Cgroups() = %v, want %v", got, want)
	}
	if got, want := again.Stale(), []host.Cgroup{"/recreated", "/removed"}; !slices.Equal(got, want) {
		t.Errorf("Stale() = %v, want %v", got, want)
	}
	if got := again.Get("/kept"); !maps.Equal(got, map[string]string{"dirty_bytes": "16777216"}) {
		t.Errorf("Get(/kept) = %v", got)
	}
	// Set on a cgroup that does not exist is refused: there is no instance
	// to bind the overrides to.
	if err := again.Set("/removed", map[string]string{"dirty_ratio": "5"}); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("Set on a missing cgroup: %v, want a not-exist error", err)
	}
}

// A file written before identities were recorded (no "ids") loads, and its
// entries are bound to the cgroups that exist now.
func TestLoadWithoutIDs(t *testing.T) {
	f := fakeCgroups{root: t.TempDir()}
	f.mkdir(t, "/a")
	path := filepath.Join(t.TempDir(), "overrides.json")
	old := `{"version": 1, "cgroups": {"/a": {"dirty_ratio": "15"}, "/gone": {"dirty_ratio": "15"}}}`
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := Load(path, DirInode(f.dir))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(o.Cgroups()); got != "[/a]" {
		t.Errorf("Cgroups() = %s, want [/a]", got)
	}
	f.recreate(t, "/a")
	if err := o.Forget("/a"); err != nil {
		t.Fatal(err)
	}
	if got := o.Cgroups(); len(got) != 0 {
		t.Errorf("after recreate and Forget: %v, want none", got)
	}
}

func TestSetRefusesNonUTF8(t *testing.T) {
	o, _ := Load(filepath.Join(t.TempDir(), "overrides.json"), nil)
	err := o.Set("/caf\xe9", map[string]string{"dirty_ratio": "5"})
	if err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("Set with a non-UTF-8 name: %v, want a refusal naming UTF-8", err)
	}
}
