package observe_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/observe"
	"github.com/memcgd/memcgd/host"
)

// A Reader that opens files from their cgroup's parent reads what one
// that opens each by its whole path does, on the real kernel: the parent,
// its children in a row, the PSI of their unified mirrors on a hybrid host,
// and a child removed (ErrVanished); Close leaves no directory open.
func TestReadFromParentsReadsWhatAFreshReaderReads(t *testing.T) {
	l := cgrouptest.Layout(t)
	parent := cgrouptest.New(t, l, 256<<20)
	var children []*cgrouptest.Cgroup
	for i := range 4 {
		children = append(children, parent.Child(t, fmt.Sprintf("c%d", i)))
	}
	before := cgroupFDs(t, l)
	r := observe.NewReader(l)
	r.OpenFromParents()
	defer r.Close()
	fresh := observe.NewReader(l)
	cgs := []host.Cgroup{parent.Path}
	for _, c := range children {
		cgs = append(cgs, c.Path)
	}
	for _, cg := range cgs {
		got, err := r.Observe(cg)
		if err != nil {
			t.Fatalf("from its parent: %v", err)
		}
		want, err := fresh.Observe(cg)
		if err != nil {
			t.Fatalf("by its whole path: %v", err)
		}
		// Idle cgroups: their figures do not change between the reads.
		if got.Limit != want.Limit || got.Usage != want.Usage || got.File != want.File || got.Pressure.Has != want.Pressure.Has {
			t.Errorf("%s from its parent: limit %d, usage %d, file %d, PSI %t; by its whole path: %d, %d, %d, %t",
				cg, got.Limit, got.Usage, got.File, got.Pressure.Has, want.Limit, want.Usage, want.File, want.Pressure.Has)
		}
	}
	removeCgroup(t, l, children[3].Path)
	if _, err := r.Observe(children[3].Path); !errors.Is(err, host.ErrVanished) {
		t.Errorf("a removed child from its parent: %v, want ErrVanished", err)
	}
	r.Close()
	if n := cgroupFDs(t, l) - before; n != 0 {
		t.Errorf("%d cgroup files or directories still open after Close", n)
	}
}
