package journal_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/journal"
)

// issue 9, defect 8: memcgd re-reads a control file before each write it
// makes to it (each squeeze step, the restore, the thaw) and stops if the
// file does not hold what memcgd wrote last; another writer's value then
// stays, also at the undo.
func TestApplyKeepsAnotherWritersValue(t *testing.T) {
	l := cgrouptest.Layout(t)
	const (
		original = 256 * mib
		lowered  = 192 * mib
		operator = 512 * mib // an operator raises the limit mid-squeeze
	)
	c := cgrouptest.New(t, l, original)
	file := filepath.Join(c.Dir, hardLimitFile(l))
	j := cgrouptest.Journal(t, l)
	ctx := context.Background()
	a, err := j.Apply(ctx, file, strconv.Itoa(lowered), strconv.Itoa(lowered/2), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := cgrouptest.ValueFile(t, c.Dir, hardLimitFile(l)); got != lowered {
		t.Fatalf("%s after Apply = %d, want %d", file, got, lowered)
	}
	// A step that finds its own value goes ahead.
	if err := a.Set(ctx, strconv.Itoa(lowered-mib)); err != nil {
		t.Fatalf("Set with no other writer: %v", err)
	}
	write(t, file, operator)
	if err := a.Set(ctx, strconv.Itoa(lowered/2)); !errors.Is(err, journal.ErrChangedByOther) {
		t.Errorf("Set after the operator's write: %v, want journal.ErrChangedByOther", err)
	}
	if err := a.Undo(); !errors.Is(err, journal.ErrChangedByOther) {
		t.Errorf("Undo after the operator's write: %v, want journal.ErrChangedByOther", err)
	}
	if got := cgrouptest.ValueFile(t, c.Dir, hardLimitFile(l)); got != operator {
		t.Errorf("%s after the undo = %d MiB, want the operator's %d MiB", file, got/mib, operator/mib)
	}
	if p := j.Pending(); len(p) != 0 {
		t.Errorf("journal holds %v, want nothing pending", p)
	}
}
