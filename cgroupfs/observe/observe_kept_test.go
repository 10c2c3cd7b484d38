package observe_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/cgroupfs/observe"
	"github.com/memcgd/memcgd/host"
)

// A Reader that keeps its files open reads what one that opens them
// afresh would: a changed limit, pages written since, a cgroup removed
// (ErrVanished) and one made again at its path (its own limit, not the
// removed one's).
func TestKeptFilesReadAsFreshAsNewOnes(t *testing.T) {
	l := cgrouptest.Layout(t)
	parent := cgrouptest.New(t, l, 256<<20)
	c := parent.Child(t, "kept")
	write := func(dir, name, v string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0); err != nil {
			t.Fatal(err)
		}
	}
	// The limit Observe reports: v1's hard limit, v2's memory.high.
	limitFile := map[layout.Version]string{layout.V1: "memory.limit_in_bytes", layout.V2: "memory.high"}[l.Memory.Version]
	write(c.Dir, limitFile, "64M")
	r := observe.NewReader(l)
	r.KeepFilesOpen()
	defer r.Close()
	// file is memory.stat's page cache: it stays charged once written
	// back, as dirty does not (the VMs' small memory writes back soon).
	observe := func(what string) (limit, file uint64, err error) {
		t.Helper()
		s, err := r.Observe(c.Path)
		return s.Limit, s.File, err
	}

	limit, file0, err := observe("first")
	if err != nil || limit != 64<<20 {
		t.Fatalf("first: limit %d, %v; want %d", limit, err, 64<<20)
	}
	write(c.Dir, limitFile, "32M")
	if limit, _, err = observe("limit changed"); err != nil || limit != 32<<20 {
		t.Errorf("after the limit was changed: limit %d, %v; want %d", limit, err, 32<<20)
	}
	cgrouptest.DirtyFile(t, c, filepath.Join(cgrouptest.DiskDir(t), "dirty"), 8<<20)
	if _, file, err := observe("dirtied"); err != nil || file < file0+4<<20 {
		t.Errorf("after 8 MiB were written: page cache %d (was %d), %v; want at least 4 MiB more", file, file0, err)
	}

	// Remove it (its pages move to the parent), then make it again.
	removeCgroup(t, l, c.Path)
	if _, _, err := observe("removed"); !errors.Is(err, host.ErrVanished) {
		t.Errorf("after the cgroup was removed: %v, want ErrVanished", err)
	}
	if err := os.Mkdir(c.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(c.Dir, limitFile, "16M")
	if limit, _, err = observe("made again"); err != nil || limit != 16<<20 {
		t.Errorf("a cgroup made again at the path: limit %d, %v; want its own %d", limit, err, 16<<20)
	}
}

// removeCgroup removes cg from every hierarchy of l that has it.
func removeCgroup(t *testing.T, l layout.Layout, cg host.Cgroup) {
	t.Helper()
	dirs := []string{l.Memory.Dir(cg)}
	if l.Unified != nil {
		dirs = append(dirs, l.Unified.Dir(cg))
	}
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("remove %s: %v", d, err)
		}
	}
}

// A Reader keeps at most a bounded number of files open however many
// cgroups it reads, and Close closes them all.
func TestKeptFilesAreBounded(t *testing.T) {
	l := cgrouptest.Layout(t)
	parent := cgrouptest.New(t, l, 256<<20)
	var children []*cgrouptest.Cgroup
	for i := range 12 {
		children = append(children, parent.Child(t, fmt.Sprintf("c%d", i)))
	}
	r := observe.NewReader(l)
	r.KeepFilesOpen()
	defer r.Close()
	before := cgroupFDs(t, l)
	most := 0
	for range 3 {
		for _, c := range children {
			if _, err := r.Observe(c.Path); err != nil {
				t.Fatal(err)
			}
			most = max(most, cgroupFDs(t, l)-before)
		}
	}
	// 5 files of 12 cgroups: 60 without a bound.
	if most == 0 || most > 32 {
		t.Errorf("at most %d cgroup files open while reading 12 cgroups, want between 1 and 32", most)
	}
	r.Close()
	if n := cgroupFDs(t, l) - before; n != 0 {
		t.Errorf("%d cgroup files still open after Close", n)
	}
}

// cgroupFDs counts this process's open files on the cgroup mounts of l.
func cgroupFDs(t *testing.T, l layout.Layout) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	mounts := []string{l.Memory.Mount + "/"}
	if l.Unified != nil {
		mounts = append(mounts, l.Unified.Mount+"/")
	}
	n := 0
	for _, e := range ents {
		p, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil {
			continue // closed meanwhile (ReadDir's own fd)
		}
		for _, m := range mounts {
			if strings.HasPrefix(p, m) {
				n++
				break
			}
		}
	}
	return n
}
