package metrics

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/state"
)

// The journal counts as lost when its file is gone or replaced, and as
// failing when its filesystem is read-only or full; statfs is faked for
// the filesystem cases, the file cases are real.
func TestJournalProblem(t *testing.T) {
	const bsize = 4096
	fs := func(flags int64, bfree uint64) func(string, *unix.Statfs_t) error {
		return func(_ string, st *unix.Statfs_t) error {
			st.Flags, st.Bfree, st.Bsize = flags, bfree, bsize
			return nil
		}
	}
	roomy := fs(0, 1<<20)
	tests := []struct {
		name   string
		setup  func(t *testing.T, path string)
		statfs func(string, *unix.Statfs_t) error
		want   string // a part of the problem, "" for none
	}{
		{"in place", file, roomy, ""},
		{"deleted", func(*testing.T, string) {}, roomy, "no such file"},
		{"replaced by a directory", func(t *testing.T, p string) { mkdir(t, p) }, roomy, "not a regular file"},
		{"replaced by a symlink", func(t *testing.T, p string) {
			file(t, p+".old")
			if err := os.Symlink(p+".old", p); err != nil {
				t.Fatal(err)
			}
		}, roomy, "not a regular file"},
		{"read-only filesystem", file, fs(unix.ST_RDONLY, 1<<20), "read-only"},
		{"full", file, fs(0, journalMinFree/bsize-1), "bytes free, want at least 1048576"},
		{"just enough room", file, fs(0, journalMinFree/bsize), ""},
		{"statfs fails", file, func(string, *unix.Statfs_t) error { return errors.New("EIO") }, "statfs: EIO"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal")
			tt.setup(t, path)
			got := journalProblem(path, tt.statfs)
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("journalProblem = %q, want %q", got, tt.want)
			}
			if got != "" && !strings.Contains(got, path) {
				t.Errorf("journalProblem = %q: does not name %s", got, path)
			}
		})
	}
}

func file(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, path string) {
	t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
}

// The journal's families follow its file at each scrape.
func TestJournalExported(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	file(t, path)
	pending := 3
	reg, err := NewRegistry(func() []state.Status { return nil }, WithJournal(path, func() int { return pending }))
	if err != nil {
		t.Fatal(err)
	}
	page := func() string {
		rec := httptest.NewRecorder()
		Handler(reg, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		return rec.Body.String()
	}
	for _, want := range []string{"memcgd_journal_healthy 1\n", "memcgd_journal_pending_changes 3\n"} {
		if p := page(); !strings.Contains(p, want) {
			t.Errorf("no %q in\n%s", want, own(p))
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	pending = 0
	for _, want := range []string{"memcgd_journal_healthy 0\n", "memcgd_journal_pending_changes 0\n"} {
		if p := page(); !strings.Contains(p, want) {
			t.Errorf("journal deleted: no %q in\n%s", want, own(p))
		}
	}
}
