package journal

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// Loading any journal file, damaged or planted, never panics; keeps only
// changes to files the journal may write; never hands out an id the file
// already holds; and compacts to a file that loads to the same changes.
func FuzzJournalLoad(f *testing.F) {
	// The journal logs each line it drops; a fuzz worker whose output
	// nobody reads would block on a full pipe.
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.DiscardHandler))
	f.Cleanup(func() { slog.SetDefault(prev) })
	f.Add([]byte(`{"id":1,"path":"/sys/fs/cgroup/memory/a/memory.limit_in_bytes","original":"268435456","wrote":"134217728","cgroup":42,"boot":"b"}` + "\n"))
	f.Add([]byte(`{"id":1,"path":"/sys/fs/cgroup/unified/a/cgroup.freeze","original":"0"}` + "\n" + `{"id":1,"done":true}` + "\n"))
	f.Add([]byte(`{"id":2,"path":"/etc/shadow","original":"x"}` + "\n" + `{"id":3,"path":"/sys/fs/cgroup/memory/b/memory.max","orig`))
	f.Add([]byte(`{"id":18446744073709551615,"path":"/sys/fs/cgroup/memory/a/memory.high","original":"max"}` + "\n"))
	f.Add([]byte("\n\n{}\nnull\n[]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "journal")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		j, err := OpenJournal(path, fakeLayout)
		if err != nil {
			t.Fatalf("OpenJournal: %v", err)
		}
		pending := j.Pending()
		for _, c := range pending {
			if err := j.check(c.Path); err != nil {
				t.Errorf("pending change to a file the journal may not write: %v", err)
			}
		}
		seen := map[uint64]bool{}
		for id := range j.pending {
			seen[id] = true
		}
		if seen[j.next] {
			t.Errorf("next id %d is pending already", j.next)
		}
		j.Close()
		j, err = OpenJournal(path, fakeLayout)
		if err != nil {
			t.Fatalf("OpenJournal of the compacted file: %v", err)
		}
		defer j.Close()
		again := j.Pending()
		if len(again) != len(pending) {
			t.Fatalf("compacted journal loads %d changes, want %d", len(again), len(pending))
		}
		for i := range again {
			if again[i] != pending[i] {
				t.Errorf("compacted journal change %d = %v, want %v", i, again[i], pending[i])
			}
		}
	})
}
