package act_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/act"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
)

// Dirtied counts what the cgroup's tasks dirtied, in bytes: a writer that
// keeps its file open has dirtied at least what it wrote.
func TestDirtiedCountsWriterBytes(t *testing.T) {
	l := cgrouptest.Layout(t)
	c := cgrouptest.New(t, l, 256<<20)
	ctx := context.Background()
	before, err := act.Dirtied(ctx, "/proc", l, c.Path)
	if err != nil {
		t.Fatal(err)
	}
	const size = 8 << 20
	cgrouptest.StartWriter(t, c, filepath.Join(t.TempDir(), "f"), size)
	after, err := act.Dirtied(ctx, "/proc", l, c.Path)
	if err != nil {
		t.Fatal(err)
	}
	if after-before < size {
		t.Errorf("Dirtied rose by %d bytes, want at least the %d written", after-before, size)
	}
	t.Logf("Dirtied: %d -> %d bytes for a %d-byte write", before, after, size)
}
