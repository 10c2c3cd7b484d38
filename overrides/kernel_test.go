package overrides

import (
	"os"
	"path"
	"path/filepath"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/host"
)

// On the real kernel: a cgroup removed and created again under the same
// name is a new kernfs node with a new inode number, so its predecessor's
// overrides are not applied to it, neither by a daemon that saw the
// removal (Forget) nor by one started after it (Load).
func TestRecreatedCgroupOnTheRealKernel(t *testing.T) {
	l := cgrouptest.Layout(t)
	parent := cgrouptest.New(t, l, 256<<20)
	cg := host.Cgroup(path.Join(string(parent.Path), "tenant"))
	dir := l.Memory.Dir(cg)
	mkdir := func() {
		t.Helper()
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mkdir()
	t.Cleanup(func() { os.Remove(dir) })
	identify := DirInode(l.Memory.Dir)
	file := filepath.Join(t.TempDir(), "overrides.json")
	o, err := Load(file, identify)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Set(cg, map[string]string{"dirty_bytes": "16M"}); err != nil {
		t.Fatal(err)
	}
	before, err := identify(cg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	mkdir()
	after, err := identify(cg)
	if err != nil {
		t.Fatal(err)
	}
	if after == before {
		t.Fatalf("the recreated cgroup has the inode %d of the removed one", after)
	}

	// A daemon started after the recreation drops the overrides at load.
	again, err := Load(file, identify)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Get(cg); len(got) != 0 {
		t.Errorf("after load: %s has the removed cgroup's overrides %v", cg, got)
	}
	// A running daemon that saw the removal forgets them.
	if err := o.Forget(cg); err != nil {
		t.Fatal(err)
	}
	if got := o.Get(cg); len(got) != 0 {
		t.Errorf("after Forget: %s has the removed cgroup's overrides %v", cg, got)
	}
	// The new cgroup's own overrides are kept by a false alarm.
	if err := o.Set(cg, map[string]string{"dirty_ratio": "5"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Forget(cg); err != nil {
		t.Fatal(err)
	}
	if got := o.Get(cg); got["dirty_ratio"] != "5" {
		t.Errorf("Forget of a cgroup that still exists dropped its overrides: %v", got)
	}
}
