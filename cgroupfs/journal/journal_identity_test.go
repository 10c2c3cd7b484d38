package journal_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/journal"
	"github.com/memcgd/memcgd/cgroupfs/layout"
)

// hardLimitFile is the hard limit a squeeze lowers: v1's
// memory.limit_in_bytes, v2's memory.max.
func hardLimitFile(l layout.Layout) string {
	if l.Memory.Version == layout.V1 {
		return journal.FileLimitV1
	}
	return "memory.max"
}

// inode returns the inode number of dir, read independently of package
// journal.
func inode(t *testing.T, dir string) uint64 {
	t.Helper()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// bootID reads this boot's id, independently of package journal.
func bootID(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// issue 9, defect 6: Recover writes the original back only into the
// cgroup memcgd changed, in this boot, while the file still holds
// memcgd's value; every other record is logged and skipped, and Recover
// still succeeds. The journal is written as JSON lines by hand, as a
// crashed run leaves it.
func TestJournalRecoverUndoesOnlyItsOwnChange(t *testing.T) {
	l := cgrouptest.Layout(t)
	const (
		original = 256 * mib
		lowered  = 128 * mib // what memcgd wrote
		recreate = 192 * mib // the limit of a new cgroup of the same name, within [lowered, original)
	)
	type record map[string]any
	tests := []struct {
		name string
		// crash sets the file as the crash left it and returns the
		// journal record and the value Recover must leave.
		crash func(t *testing.T, c *cgrouptest.Cgroup, file string) (record, uint64)
	}{
		{"all matches: undone", func(t *testing.T, c *cgrouptest.Cgroup, file string) (record, uint64) {
			write(t, file, lowered)
			return record{"cgroup": inode(t, c.Dir), "boot": bootID(t)}, original
		}},
		{"cgroup removed and created again", func(t *testing.T, c *cgrouptest.Cgroup, file string) (record, uint64) {
			write(t, file, lowered)
			old := inode(t, c.Dir)
			if err := os.Remove(c.Dir); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(c.Dir, 0o755); err != nil {
				t.Fatal(err)
			}
			write(t, file, recreate)
			return record{"cgroup": old, "boot": bootID(t)}, recreate
		}},
		{"an earlier boot", func(t *testing.T, c *cgrouptest.Cgroup, file string) (record, uint64) {
			write(t, file, lowered)
			return record{"cgroup": inode(t, c.Dir), "boot": "00000000-0000-4000-8000-000000000000"}, lowered
		}},
		{"set since by another writer", func(t *testing.T, c *cgrouptest.Cgroup, file string) (record, uint64) {
			write(t, file, lowered/2)
			return record{"cgroup": inode(t, c.Dir), "boot": bootID(t)}, lowered / 2
		}},
		{"a record of an older memcgd, without identity", func(t *testing.T, c *cgrouptest.Cgroup, file string) (record, uint64) {
			write(t, file, lowered)
			return record{"wrote": nil}, lowered
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := cgrouptest.New(t, l, 0)
			c := parent.Child(t, "tenant")
			file := filepath.Join(c.Dir, hardLimitFile(l))
			write(t, file, original)
			rec, want := tt.crash(t, c, file)
			line := record{"id": 7, "path": file, "original": strconv.Itoa(original), "wrote": strconv.Itoa(lowered)}
			for k, v := range rec {
				if v == nil {
					delete(line, k)
				} else {
					line[k] = v
				}
			}
			b, err := json.Marshal(line)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "journal")
			if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
				t.Fatal(err)
			}

			j, err := journal.OpenJournal(path, l)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			if _, err := j.Recover(context.Background()); err != nil {
				t.Errorf("Recover: %v, want no error: a change it cannot undo is skipped", err)
			}
			if got := cgrouptest.ValueFile(t, c.Dir, hardLimitFile(l)); got != want {
				t.Errorf("%s after Recover = %d MiB, want %d MiB", file, got/mib, want/mib)
			}
			if p := j.Pending(); len(p) != 0 {
				t.Errorf("Pending() after Recover = %v, want none", p)
			}
		})
	}
}

// write writes v to the control file p.
func write(t *testing.T, p string, v uint64) {
	t.Helper()
	if err := ctlfile.Write(p, strconv.FormatUint(v, 10)); err != nil {
		t.Fatal(err)
	}
}
