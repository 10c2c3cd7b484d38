package daemon

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	cgobserve "github.com/memcgd/memcgd/cgroupfs/observe"
	"github.com/memcgd/memcgd/memcg"
)

// inTestVM says the tests run in test/vm's qemu VM (MEMCGD_VM=1).
func inTestVM() bool { return os.Getenv("MEMCGD_VM") == "1" }

// slow scales the tests' time bounds: qemu's emulated CPUs run the VM
// suite three to five times slower than the host.
func slow() time.Duration {
	if inTestVM() {
		return 4
	}
	return 1
}

// limitFile is the hard-limit file of the memory controller's version.
func limitFile(l layout.Layout) string {
	if l.Memory.Version == layout.V1 {
		return "memory.limit_in_bytes"
	}
	return "memory.max"
}

// setLimit sets c's hard limit.
func setLimit(t testing.TB, l layout.Layout, c *cgrouptest.Cgroup, limit uint64) {
	t.Helper()
	writeFile(t, filepath.Join(c.Dir, limitFile(l)), strconv.FormatUint(limit, 10))
}

// readLimit returns c's hard-limit file as the kernel prints it.
func readLimit(t testing.TB, l layout.Layout, c *cgrouptest.Cgroup) string {
	t.Helper()
	return readFile(t, filepath.Join(c.Dir, limitFile(l)))
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// writeFile writes s to a cgroupfs file in one write(2).
func writeFile(t testing.TB, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatalf("write %q to %s: %v", s, p, err)
	}
}

// observe reads c's state as the daemon does.
func observe(t testing.TB, l layout.Layout, c *cgrouptest.Cgroup) memcg.Stat {
	t.Helper()
	s, err := cgobserve.NewReader(l).Observe(c.Path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// frozen lists the freezer files of c that say it is frozen, or freezing:
// on cgroup v2, and in the unified hierarchy of a hybrid host,
// cgroup.freeze and the "frozen" key of cgroup.events
// (kernel/cgroup/freezer.c); in a v1 freezer hierarchy, freezer.state
// other than THAWED (kernel/cgroup/legacy_freezer.c).
func frozen(t testing.TB, l layout.Layout, c *cgrouptest.Cgroup) []string {
	t.Helper()
	var out []string
	if dir, ok := l.UnifiedDir(c.Path); ok {
		if v := readFile(t, filepath.Join(dir, "cgroup.freeze")); v != "0" {
			out = append(out, dir+"/cgroup.freeze="+v)
		}
		for line := range strings.Lines(readFile(t, filepath.Join(dir, "cgroup.events"))) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "frozen "); ok && v != "0" {
				out = append(out, dir+"/cgroup.events:frozen="+v)
			}
		}
	}
	if dir, ok := l.FreezerDir(c.Path); ok {
		if v := readFile(t, filepath.Join(dir, "freezer.state")); v != "THAWED" {
			out = append(out, dir+"/freezer.state="+v)
		}
	}
	return out
}

// hasFreezer reports whether a freezer reaches c, so the daemon can
// throttle it.
func hasFreezer(l layout.Layout, c *cgrouptest.Cgroup) bool {
	if dir, ok := l.UnifiedDir(c.Path); ok {
		if _, err := os.Stat(filepath.Join(dir, "cgroup.freeze")); err == nil {
			return true
		}
	}
	_, ok := l.FreezerDir(c.Path)
	return ok
}

// journalEntry is a line of the daemon's undo journal (the format of
// journal.Journal): a change recorded under ID, or with Done the note
// that it was undone.
type journalEntry struct {
	ID       uint64 `json:"id"`
	Done     bool   `json:"done"`
	Path     string `json:"path"`
	Original string `json:"original"`
}

// journalPending returns the control files the journal at p holds changes
// of that are not marked undone: what the daemon had changed, or was
// about to change, when it stopped. A torn last line is ignored, as the
// journal itself ignores it.
func journalPending(t testing.TB, p string) []string {
	t.Helper()
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pending := map[uint64]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e journalEntry
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		if e.Done {
			delete(pending, e.ID)
		} else {
			pending[e.ID] = e.Path
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pending {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// diskDir returns a temporary directory on a real disk: page cache tests
// mean nothing on tmpfs, whose pages are never dirty in the writeback
// sense.
func diskDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == unix.TMPFS_MAGIC {
		t.Fatalf("%s is on tmpfs: set TMPDIR to a directory on a disk", dir)
	}
	return dir
}

// poll calls cond every interval until it returns true or timeout
// passes, and returns how long that took and whether cond held.
func poll(timeout, interval time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for {
		if cond() {
			return time.Since(start), true
		}
		if time.Since(start) > timeout {
			return time.Since(start), false
		}
		time.Sleep(interval)
	}
}

const mib = 1 << 20
