package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/layout"
)

// fakeLayout is a layout whose mounts the journal checks paths against;
// nothing is read from it.
var fakeLayout = layout.Layout{
	Memory:  layout.Hierarchy{Version: layout.V1, Mount: "/sys/fs/cgroup/memory", Root: "/"},
	Unified: &layout.Hierarchy{Version: layout.V2, Mount: "/sys/fs/cgroup/unified", Root: "/"},
}

func TestJournalRecordRefusesFilesItMayNotWrite(t *testing.T) {
	j, err := OpenJournal(filepath.Join(t.TempDir(), "j", "journal"), fakeLayout)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	tests := []struct {
		path string
		ok   bool
	}{
		{"/sys/fs/cgroup/memory/a/memory.limit_in_bytes", true},
		{"/sys/fs/cgroup/unified/a/cgroup.freeze", true},
		{"/sys/fs/cgroup/memory/a/memory.high", true},
		{"/sys/fs/cgroup/memory/a/memory.max", true},
		{"/sys/fs/cgroup/memory/a/freezer.state", true},
		{"/etc/passwd", false},                                           // not beneath a mount
		{"/sys/fs/cgroup/memory/a/../../../../etc/cgroup.freeze", false}, // not clean
		{"/sys/fs/cgroup/memory/a/memory.swappiness", false},             // not a file memcgd changes
		{"/sys/fs/cgroup/memoryX/memory.max", false},                     // a mount's prefix is not the mount
		{"sys/fs/cgroup/memory/memory.max", false},                       // relative
		{"/sys/fs/cgroup/freezer/a/freezer.state", false},                // a mount not in the layout
	}
	for _, tt := range tests {
		_, err := j.Record(Change{Path: tt.path, Original: "0"})
		if (err == nil) != tt.ok {
			t.Errorf("Record(%s) error = %v, want ok=%v", tt.path, err, tt.ok)
		}
	}
}

func TestJournalRefusesASecondChangeToOneFile(t *testing.T) {
	j, err := OpenJournal(filepath.Join(t.TempDir(), "journal"), fakeLayout)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	c := Change{Path: "/sys/fs/cgroup/memory/a/memory.limit_in_bytes", Original: "1048576"}
	id, err := j.Record(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Record(c); !errors.Is(err, ErrChangePending) {
		t.Errorf("second Record of one file: error %v, want ErrChangePending", err)
	}
	if err := j.Done(id); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Record(c); err != nil {
		t.Errorf("Record after Done: %v", err)
	}
	if err := j.Done(id); err == nil {
		t.Errorf("Done(%d) twice: no error", id)
	}
}

func TestJournalIsOpenInOneProcessAtATime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	j, err := OpenJournal(path, fakeLayout)
	if err != nil {
		t.Fatal(err)
	}
	// The second open is a second lock holder in this process: flock
	// locks belong to the open file, and the first one's is held by this
	// process's pid.
	_, err = OpenJournal(path, fakeLayout)
	want := fmt.Sprintf("journal %s: %s locked by pid %d (another memcgd running?)", path, filepath.Dir(path), os.Getpid())
	if err == nil || err.Error() != want {
		t.Errorf("second OpenJournal(%s) while open: error %v, want %q", path, err, want)
	}
	j.Close()
	j, err = OpenJournal(path, fakeLayout)
	if err != nil {
		t.Fatalf("OpenJournal after Close: %v", err)
	}
	j.Close()
}

func TestJournalSurvivesATornLastLineAndCompacts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	path := filepath.Join(dir, "journal")
	j, err := OpenJournal(path, fakeLayout)
	if err != nil {
		t.Fatal(err)
	}
	kept := Change{Path: "/sys/fs/cgroup/memory/a/memory.limit_in_bytes", Original: "268435456"}
	undone := Change{Path: "/sys/fs/cgroup/unified/a/cgroup.freeze", Original: "0"}
	idKept, err := j.Record(kept)
	if err != nil {
		t.Fatal(err)
	}
	idUndone, err := j.Record(undone)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Done(idUndone); err != nil {
		t.Fatal(err)
	}
	j.Close()
	// A crash in the middle of appending the next record.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"id":3,"path":"/sys/fs/cgroup/memory/b/memory.limit_in_bytes","orig`)
	f.Close()

	j, err = OpenJournal(path, fakeLayout)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if got := j.Pending(); len(got) != 1 || got[0].Path != kept.Path || got[0].Original != kept.Original {
		t.Errorf("Pending() after torn write = %v, want [%v]", got, kept)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(b), "\n"); lines != 1 || !strings.Contains(string(b), `"id":`+strconv.FormatUint(idKept, 10)) {
		t.Errorf("journal after reopening is not compacted to the one pending record:\n%s", b)
	}
	id, err := j.Record(Change{Path: "/sys/fs/cgroup/memory/c/memory.limit_in_bytes", Original: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if id <= idUndone {
		t.Errorf("id after reopening = %d, want above %d: ids must not be reused", id, idUndone)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s mode = %v, want %v", p, got, want)
		}
	}
}

func TestJournalIgnoresPlantedChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	planted := `{"id":1,"path":"/etc/shadow","original":"x"}` + "\n" +
		`{"id":2,"path":"/sys/fs/cgroup/memory/a/memory.limit_in_bytes","original":"4096"}` + "\n"
	if err := os.WriteFile(path, []byte(planted), 0o600); err != nil {
		t.Fatal(err)
	}
	j, err := OpenJournal(path, fakeLayout)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	got := j.Pending()
	if len(got) != 1 || got[0].Path != "/sys/fs/cgroup/memory/a/memory.limit_in_bytes" {
		t.Errorf("Pending() = %v, want only the memory.limit_in_bytes change", got)
	}
}

// The holder of the journal's flock is found in /proc/locks by the
// directory's device and inode; a request blocked on the lock, a lock of
// another kind or another file, and a holder outside this pid namespace
// are not it.
func TestFlockHolder(t *testing.T) {
	const (
		dev = 0xfe00 // major 0xfe, minor 0
		ino = 5310748
	)
	for _, tt := range []struct {
		name   string
		locks  string
		pid    int
		listed bool
	}{
		{"the holder", "5: FLOCK  ADVISORY  WRITE 12965 fe:00:5310748 0 EOF\n", 12965, true},
		{"the holder, with requests blocked on it",
			"5: FLOCK  ADVISORY  WRITE 12965 fe:00:5310748 0 EOF\n5: -> FLOCK  ADVISORY  WRITE 13533 fe:00:5310748 0 EOF\n", 12965, true},
		{"only a blocked request", "5: -> FLOCK  ADVISORY  WRITE 13533 fe:00:5310748 0 EOF\n", 0, false},
		{"another inode", "5: FLOCK  ADVISORY  WRITE 12965 fe:00:5310749 0 EOF\n", 0, false},
		{"another device", "5: FLOCK  ADVISORY  WRITE 12965 fe:01:5310748 0 EOF\n", 0, false},
		{"a POSIX lock of the file", "3: POSIX  ADVISORY  WRITE 12965 fe:00:5310748 0 EOF\n", 0, false},
		{"an OFD lock: no pid", "2: OFDLCK ADVISORY  WRITE -1 fe:00:5310748 0 EOF\n", 0, false},
		{"no locks", "", 0, false},
		{"a line that does not parse", "garbage\n", 0, false},
	} {
		pid, ok := flockHolder([]byte(tt.locks), dev, ino)
		if pid != tt.pid && tt.listed || ok != tt.listed {
			t.Errorf("%s: flockHolder = %d, %v; want %d, %v", tt.name, pid, ok, tt.pid, tt.listed)
		}
	}
}
