package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/agent"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/layout"
)

// anonHelper is the first argument that makes the test binary the
// anonymous memory helper.
const anonHelper = "memcgd-test-anon-helper"

// runAnonHelper maps size bytes of anonymous memory, touches every page
// so that all are charged, and sleeps holding them until killed.
func runAnonHelper(size string) int {
	n, err := strconv.Atoi(size)
	if err != nil || n <= 0 {
		fmt.Fprintf(os.Stderr, "%s: size %q: want a positive number of bytes\n", anonHelper, size)
		return 2
	}
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: mmap %d bytes: %v\n", anonHelper, n, err)
		return 1
	}
	for i := 0; i < n; i += os.Getpagesize() {
		b[i] = 1
	}
	for {
		time.Sleep(time.Hour)
	}
}

// startAnon starts a process in c holding size bytes of anonymous memory
// and returns once c's usage shows them.
func startAnon(t *testing.T, l layout.Layout, c *cgrouptest.Cgroup, size uint64) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := c.Start(t, exe, anonHelper, strconv.FormatUint(size, 10))
	if _, ok := poll(10*time.Second, 10*time.Millisecond, func() bool { return observe(t, l, c).Anon >= size }); !ok {
		t.Fatalf("%s: anon %d MiB 10 s after starting the helper, want %d MiB (stderr %q)",
			c.Path, observe(t, l, c).Anon/mib, size/mib, cmd.Stderr)
	}
}

// noSwap keeps c's anonymous memory out of swap, where a swap device
// exists: v2 memory.swap.max 0, v1 memory.swappiness 0
// (mm/vmscan.c get_scan_count: no anon scan for a memcg with swappiness 0).
func noSwap(t *testing.T, l layout.Layout, c *cgrouptest.Cgroup) {
	t.Helper()
	file, value := "memory.swap.max", "0"
	if l.Memory.Version == layout.V1 {
		file = "memory.swappiness"
	}
	p := filepath.Join(c.Dir, file)
	if _, err := os.Stat(p); err == nil {
		writeFile(t, p, value)
	}
}

// Issue 9, defects 3 and 12: a cgroup holding only anonymous memory,
// without swap, near its limit and below its low watermark. The daemon's
// background reclaim finds nothing there (v2 memory.reclaim answers
// EAGAIN, a v1 squeeze EBUSY).
//
// It retries with exponential backoff, not at every step: over window, at
// most the attempts that the backoff's delays allow (50 ms doubled),
// counted in the daemon's debug log and, on v1, in the journal, which
// records every limit squeeze; without backoff there is one attempt per
// 50 ms step.
//
// Then SIGTERM stops the daemon within 2 s, with status 0 and nothing left
// changed: no lowered limit, no frozen cgroup, no pending journal entry.
// On v2 the kernel's EAGAIN once parked the workers forever in os.File's
// poller, and SIGTERM hung.
func TestDaemonReclaimThatFindsNothing(t *testing.T) {
	l := cgrouptest.Layout(t)
	const (
		limit = 64 * mib
		// anon leaves about 12 MiB for the helper's runtime and the
		// rest: free stays below low_wmark 20 MiB of min_free_kbytes
		// 16384.
		anon    = limit - 12*mib
		window  = 3 * time.Second
		stopped = 2 * time.Second
	)
	parent := cgrouptest.New(t, l, 0)
	c := parent.Child(t, "anon")
	setLimit(t, l, c, limit)
	noSwap(t, l, c)
	startAnon(t, l, c, anon)
	s := observe(t, l, c)
	t.Logf("%s: usage %d MiB of %d MiB, anon %d MiB, file %d KiB", c.Path, s.Usage/mib, limit/mib, s.Anon/mib, s.File>>10)
	before := newUndoState(t, l, parent, c)

	d := newDaemon(t, managedConfig(parent.Path, "min_free_kbytes: 16384, dirty_background_bytes: 64M, dirty_bytes: 96M"),
		"--log-level", "debug")
	d.start()
	time.Sleep(window)
	if st, err := d.tryStat(c.Path); err == nil {
		t.Logf("memcgd stat %s: free %d KiB, low_wmark %d KiB, pgoutrun %d, reclaimed_bytes %d",
			c.Path, (st["limit"]-st["usage"])>>10, st["low_wmark"]>>10, st["pgoutrun"], st["reclaimed_bytes"])
	} else {
		t.Logf("no status of %s: %v", c.Path, err)
	}

	start := time.Now()
	d.signal(unix.SIGTERM)
	select {
	case <-d.Exited():
	case <-time.After(stopped * slow()):
		t.Fatalf("memcgd has not exited %v after SIGTERM, with reclaim finding nothing in %s", stopped*slow(), c.Path)
	}
	t.Logf("memcgd exited %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	if d.ExitErr() != nil {
		t.Errorf("memcgd after SIGTERM: %v, want exit status 0", d.ExitErr())
	}
	if ch := before.changed(t); len(ch) > 0 {
		t.Errorf("left changed after SIGTERM: %v", ch)
	}
	if p := journalPending(t, d.Journal); len(p) > 0 {
		t.Errorf("journal entries still pending after SIGTERM: %v", p)
	}

	// The most failed attempts within window: the first at once, each
	// next one after twice the wait of the one before, from the 50 ms
	// step. The log and journal cover a little more than window (the
	// start, the stop): the bound allows one more.
	most, at := 2, time.Duration(0)
	for wait := agent.DefaultActiveInterval; at+wait <= window; wait *= 2 {
		at += wait
		most++
	}
	var failed, ok int
	for line := range strings.Lines(d.logText()) {
		if !strings.Contains(line, `msg="reclaim attempt" cgroup=`+string(c.Path)+" ") {
			continue
		}
		if strings.Contains(line, " failures=") {
			failed++
		} else {
			ok++ // it found something: the helper's few file pages
		}
	}
	squeezes := 0
	if l.Memory.Version == layout.V1 {
		squeezes = journalRecords(t, d.Journal, filepath.Join(c.Dir, "memory.limit_in_bytes"))
	}
	t.Logf("in %v: %d reclaim attempts that found nothing and %d that found some logged, %d limit squeezes journalled "+
		"(at most %d failures allowed; %d steps of %v)", window, failed, ok, squeezes, most, window/agent.DefaultActiveInterval,
		agent.DefaultActiveInterval)
	if failed+ok == 0 && squeezes == 0 && l.Memory.Version == layout.V1 {
		t.Errorf("no reclaim attempt on %s in %v: the daemon did not try, so the test shows nothing", c.Path, window)
	}
	if failed > most || squeezes > most+ok {
		t.Errorf("%d reclaim attempts found nothing and %d squeezes in %v, want at most %d: no backoff", failed, squeezes, window, most)
	}
}

// journalRecords counts the changes of the control file p that the
// journal at jp recorded, undone or not.
func journalRecords(t *testing.T, jp, p string) int {
	t.Helper()
	b, err := os.ReadFile(jp)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(string(b)) {
		var e journalEntry
		if json.Unmarshal([]byte(line), &e) == nil && !e.Done && e.Path == p {
			n++
		}
	}
	return n
}
