package cgrouptest

import (
	"path/filepath"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/journal"
	"github.com/memcgd/memcgd/cgroupfs/layout"
)

// Journal opens a fresh journal for one test, closed at cleanup.
func Journal(t testing.TB, l layout.Layout) *journal.Journal {
	t.Helper()
	j, err := journal.OpenJournal(filepath.Join(t.TempDir(), "journal"), l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}
