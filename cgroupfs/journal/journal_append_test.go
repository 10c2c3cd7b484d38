package journal

import (
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
)

// limitFileSize makes writes to regular files past size bytes fail
// (RLIMIT_FSIZE; EFBIG, and a short write for one that straddles it) until
// the returned function lifts the limit again: a full disk, injected into
// the journal's own writes.
func limitFileSize(t *testing.T, size int64) (lift func()) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	signal.Ignore(syscall.SIGXFSZ) // else the kernel's SIGXFSZ kills the test
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: uint64(size), Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	lifted := false
	lift = func() {
		if lifted {
			return
		}
		lifted = true
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
			t.Fatal(err)
		}
		signal.Reset(syscall.SIGXFSZ)
	}
	t.Cleanup(lift)
	return lift
}

func fileSize(t *testing.T, p string) int64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// issue 9, defect 7: a record whose append fails half-way (the disk filled
// up) must not damage the next record, and the failed record's id is not
// used again.
func TestJournalCutsOffAFailedAppend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	j, err := OpenJournal(path, fakeLayout)
	if err != nil {
		t.Fatal(err)
	}
	a := Change{Path: "/sys/fs/cgroup/memory/a/memory.limit_in_bytes", Original: "268435456"}
	b := Change{Path: "/sys/fs/cgroup/memory/b/memory.limit_in_bytes", Original: "268435456"}
	c := Change{Path: "/sys/fs/cgroup/memory/c/memory.limit_in_bytes", Original: "268435456"}
	idA, err := j.Record(a)
	if err != nil {
		t.Fatal(err)
	}
	lift := limitFileSize(t, fileSize(t, path)+20) // b's line is cut after 20 bytes
	if _, err := j.Record(b); err == nil {
		t.Fatal("Record with the disk full: no error")
	}
	lift()
	idC, err := j.Record(c)
	if err != nil {
		t.Fatalf("Record after the disk has room again: %v", err)
	}
	if idC <= idA+1 {
		t.Errorf("id of the record after the failed one = %d, want above %d: the failed record's id is not reused", idC, idA+1)
	}
	j.Close()

	j, err = OpenJournal(path, fakeLayout)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	got := j.Pending()
	if len(got) != 2 || got[0].Path != a.Path || got[1].Path != c.Path {
		t.Errorf("Pending() after reopening = %v, want the changes to a and c", got)
	}
}

// issue 9, defect 7: a Done that cannot be written must not keep the file
// pending until a restart, nor leave the change pending in the file.
func TestJournalFailedDoneDoesNotWedgeTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	j, err := OpenJournal(path, fakeLayout)
	if err != nil {
		t.Fatal(err)
	}
	a := Change{Path: "/sys/fs/cgroup/memory/a/memory.limit_in_bytes", Original: "268435456"}
	id, err := j.Record(a)
	if err != nil {
		t.Fatal(err)
	}
	lift := limitFileSize(t, fileSize(t, path))
	if err := j.Done(id); err == nil {
		t.Error("Done with the disk full: no error")
	}
	lift()
	id2, err := j.Record(a)
	if errors.Is(err, ErrChangePending) {
		t.Fatalf("Record of the same file after a failed Done: %v; the file is wedged", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Done(id2); err != nil {
		t.Fatal(err)
	}
	j.Close()

	j, err = OpenJournal(path, fakeLayout)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if p := j.Pending(); len(p) != 0 {
		t.Errorf("Pending() after reopening = %v, want none", p)
	}
}
