package cgroupfs_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/journal"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
)

// On v1, Reclaim lowers memory.limit_in_bytes below usage for the length
// of each step (the squeeze); an Observe whose read overlaps a step still
// reports the cgroup's own limit. The test reads the file itself between
// the Observes, to show that the squeezes did lower it while they ran.
func TestObserveLooksThroughSqueezes(t *testing.T) {
	l := cgrouptest.Layout(t)
	if l.Memory.Version != layout.V1 {
		t.Skip("only v1's reclaim (a limit squeeze) lowers the limit; v2 writes memory.reclaim")
	}
	const (
		limit  = 512 * mib
		cache  = 96 * mib
		rounds = 4
	)
	parent := cgrouptest.New(t, l, 0)
	c := parent.Child(t, "squeezed")
	if err := ctlfile.Write(filepath.Join(c.Dir, journal.FileLimitV1), strconv.Itoa(limit)); err != nil {
		t.Fatal(err)
	}
	fs := cgrouptest.FS(t, l, parent.Path, cgrouptest.Journal(t, l), nil)
	defer fs.Close()
	file := filepath.Join(cgrouptest.DiskDir(t), "cache")

	var (
		observes, lowered, wrong int
		lowest                   uint64 = limit
	)
	for round := range rounds {
		cgrouptest.DirtyFile(t, c, file, cache)
		cgrouptest.SyncFile(t, file)
		var wg sync.WaitGroup
		done := make(chan struct{})
		var rerr error
		wg.Go(func() {
			defer close(done)
			_, rerr = fs.Reclaim(context.Background(), c.Path, cache-16*mib, 0)
		})
		for running := true; running; {
			select {
			case <-done:
				running = false
			default:
			}
			s, err := fs.Observe(context.Background(), c.Path)
			if err != nil {
				t.Fatalf("Observe: %v", err)
			}
			observes++
			if s.Limit != limit || s.Max != limit {
				wrong++
				t.Errorf("round %d: Observe reported limit %d, max %d during a squeeze; want the cgroup's %d", round, s.Limit, s.Max, limit)
			}
			raw, err := ctlfile.ReadUint(filepath.Join(c.Dir, journal.FileLimitV1))
			if err != nil {
				t.Fatal(err)
			}
			if raw < limit {
				lowered++
				lowest = min(lowest, raw)
			}
		}
		wg.Wait()
		if rerr != nil && !errors.Is(rerr, host.ErrNothingReclaimed) {
			t.Fatalf("round %d: Reclaim: %v", round, rerr)
		}
	}
	t.Logf("%d Observes during %d squeezes, %d wrong; %d reads of the file between them saw it lowered, to %d MiB at the lowest",
		observes, rounds, wrong, lowered, lowest/mib)
	if lowered == 0 {
		t.Fatalf("no read of %s saw a squeeze's lowered limit in %d squeezes of %d MiB: the test saw no squeeze to look through",
			journal.FileLimitV1, rounds, cache/mib)
	}
	if got := cgrouptest.ValueFile(t, c.Dir, journal.FileLimitV1); got != limit {
		t.Errorf("limit after the squeezes: %d, want %d back", got, limit)
	}
}
