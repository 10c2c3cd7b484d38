package cgroupfs_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/dirtytrack"
	"github.com/memcgd/memcgd/cgroupfs/watch"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// Where the tracker counts levels, the Watcher reports a cgroup whose
// dirty+writeback, as memory.stat reads it, rises above Wake.LevelAbove
// or falls below Wake.LevelBelow: absolute levels, anchored to memory.stat
// by an observation. Nothing is reported while the level stays within.
func TestTrackedWatcherReportsLevelCrossings(t *testing.T) {
	l := cgrouptest.Layout(t)
	tr := cgrouptest.LoadTrackerOptions(t, dirtytrack.Options{Levels: true})
	fs := cgrouptest.FS(t, l, "/", nil, tr)
	if !fs.DirtyPath().Levels {
		if os.Getenv("MEMCGD_VM") == "1" {
			t.Fatalf("no level counts in the test VM: %s", tr.NoLevels())
		}
		t.Skipf("this kernel refuses the level programs (%s): the VMs run this test", tr.NoLevels())
	}
	c := cgrouptest.New(t, l, 0)
	w, err := fs.NewWatcher(watch.WatcherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx := t.Context()
	level := func() uint64 {
		t.Helper()
		if _, err := fs.DirtyCounts(ctx, c.Path); err != nil { // counted from here
			t.Fatal(err)
		}
		s, err := fs.Observe(ctx, c.Path) // anchors the count
		if err != nil {
			t.Fatal(err)
		}
		return s.Dirty + s.Writeback
	}
	file := filepath.Join(cgrouptest.DiskDir(t), "level")
	cgrouptest.DirtyFile(t, c, file, 8*mib)
	now := level()
	if err := w.Watch(c.Path, host.Wake{UsageAbove: memcg.NoLimit, LevelAbove: now + 16*mib, LevelBelow: 0}); err != nil {
		t.Fatal(err)
	}
	cgrouptest.DirtyFile(t, c, file+"2", 8*mib)
	if _, ok := awaitWake(w.Events(), c.Path, 500*time.Millisecond); ok {
		t.Errorf("reported at 8 MiB over %d, armed at 16 MiB over", now)
	}
	cgrouptest.DirtyFile(t, c, file+"3", 16*mib)
	if _, ok := awaitWake(w.Events(), c.Path, wakeBound); !ok {
		t.Fatalf("not reported within %v of 24 MiB over %d, armed at 16 MiB over", wakeBound, now)
	}
	now = level()
	if err := w.Watch(c.Path, host.Wake{UsageAbove: memcg.NoLimit, LevelAbove: memcg.NoLimit, LevelBelow: now / 2}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{file, file + "2", file + "3"} {
		cgrouptest.SyncFile(t, f)
	}
	if _, ok := awaitWake(w.Events(), c.Path, wakeBound); !ok {
		t.Fatalf("not reported within %v of its files' fsync, armed below half of %d", wakeBound, now)
	}
}
