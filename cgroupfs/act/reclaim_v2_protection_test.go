package act_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/act"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
)

// issue 9, defect 13: background reclaim of a parent must not take a
// low-protected child's page cache, even once the unprotected sibling's is
// gone: the kernel then reclaims below memory.low (mm/vmscan.c
// do_try_to_free_pages, memcg_low_reclaim), and counts it in the child's
// memory.events "low". Repeated reclaim of the parent must leave the child
// at its usage and that counter at 0, and still reclaim the sibling.
func TestReclaimKeepsChildrensMemoryLow(t *testing.T) {
	l := cgrouptest.Layout(t)
	if l.Memory.Version != layout.V2 {
		t.Skip("memory.low is cgroup v2's")
	}
	dir := cgrouptest.DiskDir(t)
	sz := reclaimSizes(t)
	protectedCache, otherCache := sz.ask/2, sz.ask
	low := protectedCache + protectedCache/2
	parent := cgrouptest.New(t, l, 0)
	protected := parent.Child(t, "protected")
	other := parent.Child(t, "unprotected")
	if err := ctlfile.Write(filepath.Join(protected.Dir, "memory.low"), strconv.FormatUint(low, 10)); err != nil {
		t.Fatal(err)
	}
	writeSynced(t, protected, filepath.Join(dir, "protected"), protectedCache)
	writeSynced(t, other, filepath.Join(dir, "other"), otherCache)
	j := cgrouptest.Journal(t, l)
	protectedBefore, otherBefore := protected.Usage(t), other.Usage(t)

	// Ask for three times all there is, in rounds.
	var got uint64
	var rounds, nothing int
	for asked := uint64(0); asked < 3*(protectedCache+otherCache); asked += 16 * mib {
		n, err := act.Reclaim(context.Background(), l, parent.Path, 16*mib, 0, j, nil)
		switch {
		case errors.Is(err, host.ErrNothingReclaimed):
			nothing++
		case err != nil:
			t.Fatalf("Reclaim: %v", err)
		}
		got += n
		rounds++
		if u := protected.Usage(t); u+mib < protectedBefore {
			t.Fatalf("after reclaim %d: protected child at %.1f MiB, was %.1f MiB with memory.low %d MiB",
				rounds, float64(u)/mib, float64(protectedBefore)/mib, low/mib)
		}
	}
	protectedAfter, otherAfter := protected.Usage(t), other.Usage(t)
	lowEvents := valueOf(t, protected.Dir, "memory.events", "low")
	t.Logf("%d reclaims of 16 MiB from the parent (%d found nothing): %.1f MiB in all; protected child (memory.low %d MiB) %.1f -> %.1f MiB, low events %d; unprotected sibling %.1f -> %.1f MiB",
		rounds, nothing, float64(got)/mib, low/mib, float64(protectedBefore)/mib, float64(protectedAfter)/mib, lowEvents,
		float64(otherBefore)/mib, float64(otherAfter)/mib)
	if lowEvents != 0 {
		t.Errorf("protected child's memory.events low = %d, want 0", lowEvents)
	}
	if otherAfter+otherCache/2 > otherBefore {
		t.Errorf("unprotected sibling %.1f -> %.1f MiB, want at least %d MiB reclaimed", float64(otherBefore)/mib, float64(otherAfter)/mib, otherCache/2/mib)
	}
}

// valueOf reads key of the flat keyed file name in dir, independently of
// package format.
func valueOf(t *testing.T, dir, name, key string) uint64 {
	t.Helper()
	return cgrouptest.ProcValue(t, filepath.Join(dir, name), key)
}
