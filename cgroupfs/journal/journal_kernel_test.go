package journal_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/journal"
	"github.com/memcgd/memcgd/cgroupfs/layout"
)

const mib = 1 << 20

// limitFile is the hard-limit file the squeeze lowers: v1's
// memory.limit_in_bytes, or v2's memory.high, which memcgd would lower
// there if it ever did.
func limitFile(l layout.Layout) string {
	if l.Memory.Version == layout.V1 {
		return journal.FileLimitV1
	}
	return journal.FileHigh
}

// A crash between a change and its undo is repaired at the next start.
func TestJournalRecoverUndoesChangesOfACrashedRun(t *testing.T) {
	l := cgrouptest.Layout(t)
	const limit = 256 << 20
	tests := []struct {
		name string
		// change makes a stateful change to c and returns the file and the
		// value that undoes it, or ok=false when this host lacks the
		// mechanism.
		change func(t *testing.T, c *cgrouptest.Cgroup) (file, original, changed string, ok bool)
	}{
		{"lowered limit", func(t *testing.T, c *cgrouptest.Cgroup) (string, string, string, bool) {
			file := filepath.Join(c.Dir, limitFile(l))
			original, err := ctlfile.Read(file)
			if err != nil {
				t.Fatal(err)
			}
			return file, original, strconv.Itoa(limit / 2), true
		}},
		{"cgroup v2 freeze", func(t *testing.T, c *cgrouptest.Cgroup) (string, string, string, bool) {
			dir, ok := l.UnifiedDir(c.Path)
			return filepath.Join(dir, journal.FileFreeze), "0", "1", ok
		}},
		{"cgroup v1 freezer", func(t *testing.T, c *cgrouptest.Cgroup) (string, string, string, bool) {
			dir, ok := l.FreezerDir(c.Path)
			return filepath.Join(dir, journal.FileFreezerV1), journal.FreezerThawedV1, "FROZEN", ok
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cgrouptest.New(t, l, limit)
			c.Start(t, "sleep", "60")
			file, original, changed, ok := tt.change(t, c)
			if !ok {
				t.Skipf("no such mechanism for %s on this host", c.Path)
			}
			path := filepath.Join(t.TempDir(), "journal")

			j, err := journal.OpenJournal(path, l)
			if err != nil {
				t.Fatal(err)
			}
			ino, err := ctlfile.FileIno(file)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := j.Record(journal.Change{Path: file, Original: original, Wrote: changed, Cgroup: ino}); err != nil {
				t.Fatal(err)
			}
			if err := ctlfile.Write(file, changed); err != nil {
				t.Fatal(err)
			}
			j.Close() // the crash: no undo, no Done

			j, err = journal.OpenJournal(path, l)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			undone, err := j.Recover(context.Background())
			if err != nil {
				t.Fatalf("Recover: %v", err)
			}
			if len(undone) != 1 || undone[0].Path != file {
				t.Errorf("Recover undid %v, want the change to %s", undone, file)
			}
			if got, err := ctlfile.Read(file); err != nil || got != original {
				t.Errorf("%s after Recover = %q (%v), want the original %q", file, got, err, original)
			}
			if p := j.Pending(); len(p) != 0 {
				t.Errorf("Pending() after Recover = %v, want none", p)
			}
		})
	}
}

func TestJournalRecoverSkipsAVanishedCgroup(t *testing.T) {
	l := cgrouptest.Layout(t)
	c := cgrouptest.New(t, l, 64<<20)
	gone := c.Child(t, "gone")
	file := filepath.Join(gone.Dir, limitFile(l))
	path := filepath.Join(t.TempDir(), "journal")
	j, err := journal.OpenJournal(path, l)
	if err != nil {
		t.Fatal(err)
	}
	ino, err := ctlfile.FileIno(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Record(journal.Change{Path: file, Original: "max", Wrote: "4096", Cgroup: ino}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if err := os.Remove(gone.Dir); err != nil {
		t.Fatal(err)
	}

	j, err = journal.OpenJournal(path, l)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	undone, err := j.Recover(context.Background())
	if err != nil || len(undone) != 0 {
		t.Errorf("Recover() = %v, %v; want nothing undone and no error", undone, err)
	}
	if p := j.Pending(); len(p) != 0 {
		t.Errorf("Pending() after Recover = %v, want none", p)
	}
}
