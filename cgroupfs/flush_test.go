package cgroupfs_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
)

// seed 000's fallback, the kernel's behaviour: a full flush writes the dirty
// pages of every cgroup on the filesystem, the sibling's as well, and
// returns when they are on disk.
func TestFlushWritesEveryCgroupsDirtyPages(t *testing.T) {
	l := cgrouptest.Layout(t)
	size := dirtySize(t)
	tests := []struct {
		name string
		// dirty makes c hold size dirty bytes of file.
		dirty func(t *testing.T, c *cgrouptest.Cgroup, file string)
	}{
		{"writer holds the file open: syncfs", func(t *testing.T, c *cgrouptest.Cgroup, file string) {
			cgrouptest.StartWriter(t, c, file, size)
		}},
		{"writer exited: sync", func(t *testing.T, c *cgrouptest.Cgroup, file string) {
			cgrouptest.DirtyFile(t, c, file, size)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := diskDir(t)
			target := cgrouptest.New(t, l, 0)
			tt.dirty(t, target, filepath.Join(dir, "target"))
			sibling := writers(t, l, 1, size)[0]
			targetBefore, siblingBefore := dirty(t, l, target), dirty(t, l, sibling)
			if targetBefore < uint64(size/2) || siblingBefore < uint64(size/2) {
				t.Fatalf("precondition: dirty %d and %d MiB, want about %d MiB each", targetBefore/mib, siblingBefore/mib, size/mib)
			}
			start := time.Now()
			if err := cgroupfs.Flush(context.Background(), "/proc", l, target.Path); err != nil {
				t.Fatalf("Flush: %v", err)
			}
			took := time.Since(start)
			targetAfter, siblingAfter := dirty(t, l, target), dirty(t, l, sibling)
			t.Logf("flush (%s): %v; target dirty %.1f -> %.1f MiB, sibling dirty %.1f -> %.1f MiB",
				tt.name, took.Round(time.Millisecond), float64(targetBefore)/mib, float64(targetAfter)/mib,
				float64(siblingBefore)/mib, float64(siblingAfter)/mib)
			if targetAfter > targetBefore/10 || siblingAfter > siblingBefore/10 {
				t.Errorf("after Flush target and sibling hold %d and %d MiB dirty, want at most 10%% of %d and %d MiB",
					targetAfter/mib, siblingAfter/mib, targetBefore/mib, siblingBefore/mib)
			}
		})
	}
}
