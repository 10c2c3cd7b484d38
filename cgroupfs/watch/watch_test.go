package watch_test

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime" // pause_test.go has a func runtime
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/format"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/cgroupfs/watch"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/internal/cputime"
	"github.com/memcgd/memcgd/memcg"
)

const watchMiB = 1 << 20

func TestWatcherOptionsRefuseBadValues(t *testing.T) {
	tests := []struct {
		name    string
		opts    watch.WatcherOptions
		wantErr string // "" for none
	}{
		{"the zero value takes the defaults", watch.WatcherOptions{}, ""},
		{"a 2 s window, as unprivileged triggers need", watch.WatcherOptions{PSI: watch.PSITrigger{Stall: 100 * time.Millisecond, Window: 2 * time.Second}}, ""},
		{"a bad trigger does not matter without PSI", watch.WatcherOptions{NoPSI: true, PSI: watch.PSITrigger{Stall: time.Hour}}, ""},
		{"negative queue", watch.WatcherOptions{Queue: -1}, "Queue -1: want 0 (default 4096) or more"},
		{"negative poll period", watch.WatcherOptions{UsagePoll: -time.Second}, "UsagePoll -1s: want 0 (default 30s) or more"},
		{"negative shortest poll period", watch.WatcherOptions{MinUsagePoll: -time.Second}, "MinUsagePoll -1s: want 0 (default 100ms) or more"},
		{"shortest poll period above the longest", watch.WatcherOptions{MinUsagePoll: time.Second, UsagePoll: 500 * time.Millisecond}, "MinUsagePoll 1s: want at most UsagePoll (500ms)"},
		{"window too short", watch.WatcherOptions{PSI: watch.PSITrigger{Stall: time.Millisecond, Window: 100 * time.Millisecond}}, "PSI.Window 100ms: want 500ms to 10s"},
		{"window too long", watch.WatcherOptions{PSI: watch.PSITrigger{Stall: time.Second, Window: time.Minute}}, "PSI.Window 1m0s: want 500ms to 10s"},
		{"stall longer than the window", watch.WatcherOptions{PSI: watch.PSITrigger{Stall: 2 * time.Second, Window: time.Second}}, "PSI.Stall 2s: want more than 0 and at most PSI.Window (1s)"},
		{"no stall", watch.WatcherOptions{PSI: watch.PSITrigger{Window: time.Second}}, "PSI.Stall 0s: want more than 0"},
		{"sub-microsecond stall", watch.WatcherOptions{PSI: watch.PSITrigger{Stall: 1500 * time.Nanosecond, Window: time.Second}}, "in whole microseconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := watch.NewWatcher(layout.Layout{}, tt.opts)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("NewWatcher: %v", err)
				}
				if err := w.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
				return
			}
			if err == nil {
				w.Close()
				t.Fatalf("NewWatcher accepted %+v, want an error containing %q", tt.opts, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestPSITriggerIsWrittenInMicroseconds(t *testing.T) {
	tests := []struct {
		trigger watch.PSITrigger
		want    string
	}{
		{watch.PSITrigger{Stall: 50 * time.Millisecond, Window: time.Second}, "some 50000 1000000"},
		{watch.PSITrigger{Full: true, Stall: 150 * time.Millisecond, Window: 2 * time.Second}, "full 150000 2000000"},
	}
	for _, tt := range tests {
		if got := tt.trigger.String(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.trigger, got, tt.want)
		}
	}
}

func TestRaiseFileLimitLeavesTheSoftLimitAtTheHardLimit(t *testing.T) {
	got, err := watch.RaiseFileLimit()
	if err != nil {
		t.Fatal(err)
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if got != lim.Cur {
		t.Errorf("RaiseFileLimit returned %d, but the soft limit is %d", got, lim.Cur)
	}
	// Go's runtime leaves it one below the hard limit (syscall.init).
	if lim.Cur+1 < lim.Max {
		t.Errorf("soft limit %d, hard limit %d: want the soft limit raised", lim.Cur, lim.Max)
	}
	t.Logf("RLIMIT_NOFILE soft %d, hard %d", lim.Cur, lim.Max)
}

// newWatcher returns a Watcher of l closed at the end of the test.
func newWatcher(t *testing.T, l layout.Layout, opts watch.WatcherOptions) *watch.Watcher {
	t.Helper()
	w, err := watch.NewWatcher(l, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return w
}

// awaitReport waits up to within for a report of cg, skipping other
// cgroups' reports, and says whether one came.
func awaitReport(w *watch.Watcher, cg host.Cgroup, within time.Duration) bool {
	_, ok := awaitReportAt(w, cg, within)
	return ok
}

// awaitReportAt is awaitReport that also returns when the report came.
func awaitReportAt(w *watch.Watcher, cg host.Cgroup, within time.Duration) (time.Time, bool) {
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case got := <-w.Events():
			if got == cg {
				return time.Now(), true
			}
		case <-timer.C:
			return time.Time{}, false
		}
	}
}

// watchUsage reads the charged memory of the cgroup at dir.
func watchUsage(t testing.TB, l layout.Layout, dir string) uint64 {
	t.Helper()
	file := "memory.current"
	if l.Memory.Version == layout.V1 {
		file = "memory.usage_in_bytes"
	}
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	u, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// reportWithin is how long a report may take after its cause: at once on
// v1, up to a poll period later on v2 for usage; plus a second of slack
// for a loaded machine (and the VM's emulated CPU).
func reportWithin(l layout.Layout, poll time.Duration) time.Duration {
	if l.Memory.Version == layout.V2 {
		return poll + time.Second
	}
	return time.Second
}

// cpuTime is the CPU time the test process has used (internal/cputime).
func cpuTime(t testing.TB) time.Duration {
	t.Helper()
	d, err := cputime.Self()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// openFiles counts the test process's open file descriptors.
func openFiles(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents) - 1 // ReadDir's own
}

func TestWatchReportsUsageCrossingItsThresholdUpwards(t *testing.T) {
	l := cgrouptest.Layout(t)
	disk := cgrouptest.DiskDir(t)
	tests := []struct {
		name       string
		above      uint64 // UsageAbove, over the cgroup's usage before the write
		write      int64
		wantReport bool
	}{
		{"a write that crosses the threshold is reported", 8 * watchMiB, 32 * watchMiB, true},
		{"a write that stays below it is not", 64 * watchMiB, 16 * watchMiB, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cgrouptest.New(t, l, 256*watchMiB)
			// At most 2 s between two reads of memory.current on v2.
			opts := watch.WatcherOptions{UsagePoll: 2 * time.Second}
			w := newWatcher(t, l, opts)
			before := watchUsage(t, l, c.Dir)
			if err := w.Watch(c.Path, host.Wake{UsageAbove: before + tt.above}); err != nil {
				t.Fatal(err)
			}
			// Receive while the write runs, to time the report.
			within := reportWithin(l, opts.UsagePoll)
			got, stop := make(chan time.Time, 1), make(chan struct{})
			defer close(stop)
			go func() {
				for {
					select {
					case cg := <-w.Events():
						if cg == c.Path {
							got <- time.Now()
							return
						}
					case <-stop:
						return
					}
				}
			}()
			start := time.Now()
			cgrouptest.DirtyFile(t, c, filepath.Join(disk, "data"), tt.write)
			wrote := time.Since(start)
			var r struct {
				at time.Time
				ok bool
			}
			select {
			case r.at = <-got:
				r.ok = true
			case <-time.After(within):
			}
			after := watchUsage(t, l, c.Dir)
			switch {
			case r.ok != tt.wantReport:
				t.Errorf("usage %d MiB -> %d MiB, threshold %d MiB: reported %v, want %v",
					before/watchMiB, after/watchMiB, (before+tt.above)/watchMiB, r.ok, tt.wantReport)
			case r.ok:
				// At a steady write rate, usage crossed the threshold
				// this far into the write.
				crossed := start.Add(time.Duration(float64(wrote) * float64(tt.above) / float64(tt.write)))
				t.Logf("reported %v after the write started (the write took %v): about %v after the crossing",
					r.at.Sub(start).Round(time.Millisecond), wrote.Round(time.Millisecond), r.at.Sub(crossed).Round(time.Millisecond))
			}
		})
	}
}

func TestWatchOfAnIdleCgroupIsQuiet(t *testing.T) {
	l := cgrouptest.Layout(t)
	disk := cgrouptest.DiskDir(t)
	c := cgrouptest.New(t, l, 256*watchMiB)
	// Charge some page cache first, so that the threshold sits above a
	// cgroup that is in use, not empty.
	cgrouptest.DirtyFile(t, c, filepath.Join(disk, "data"), 16*watchMiB)
	// A short poll period, so that the second below holds several v2 polls.
	w := newWatcher(t, l, watch.WatcherOptions{UsagePoll: 200 * time.Millisecond})
	if err := w.Watch(c.Path, host.Wake{UsageAbove: watchUsage(t, l, c.Dir) + 8*watchMiB}); err != nil {
		t.Fatal(err)
	}
	if awaitReport(w, c.Path, time.Second) {
		t.Errorf("idle cgroup reported")
	}
}

func TestWatchDoesNotReportUsageFallingBelowItsThreshold(t *testing.T) {
	l := cgrouptest.Layout(t)
	disk := cgrouptest.DiskDir(t)
	c := cgrouptest.New(t, l, 256*watchMiB)
	w := newWatcher(t, l, watch.WatcherOptions{UsagePoll: 200 * time.Millisecond})
	file := filepath.Join(disk, "data")
	cgrouptest.DirtyFile(t, c, file, 32*watchMiB)
	usage := watchUsage(t, l, c.Dir)
	if err := w.Watch(c.Path, host.Wake{UsageAbove: usage - 16*watchMiB}); err != nil {
		t.Fatal(err)
	}
	// Usage already above the threshold is reported at arming; receive
	// that report, so that only the fall could report below.
	if !awaitReport(w, c.Path, 3*time.Second) {
		t.Fatalf("not reported at arming, with usage %d MiB already above the threshold", usage/watchMiB)
	}
	// Removing the file uncharges its page cache: usage falls through the
	// threshold, which signals the v1 eventfd.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if awaitReport(w, c.Path, time.Second) {
		t.Errorf("usage fell from %d MiB to %d MiB through the threshold of %d MiB: reported, want not",
			usage/watchMiB, watchUsage(t, l, c.Dir)/watchMiB, (usage-16*watchMiB)/watchMiB)
	}
}

// TestWatchReportsUsageAlreadyAboveItsThresholdWhenArmed arms thresholds
// below the usage a cgroup has already reached, as the agent does when a
// cgroup fills between its observation and the Watch call. The kernel
// signals only crossings, so without a read at arming the cgroup would go
// unreported until the safety scan.
func TestWatchReportsUsageAlreadyAboveItsThresholdWhenArmed(t *testing.T) {
	l := cgrouptest.Layout(t)
	// The report must not come from a v2 usage poll: none runs within the
	// test. It comes at once; the bound only allows for a loaded machine.
	const poll, within = time.Minute, 3 * time.Second
	tests := []struct {
		name  string
		first uint64 // UsageAbove armed first, over the usage; 0: none
		below uint64 // then UsageAbove this far below the usage
	}{
		{"a new watch below the usage reports at once", 0, 16 * watchMiB},
		{"a threshold moved below the usage reports at once", 64 * watchMiB, 16 * watchMiB},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cgrouptest.New(t, l, 256*watchMiB)
			// A file of its own: pages cached by an earlier case stay
			// charged to that case's cgroup.
			cgrouptest.DirtyFile(t, c, filepath.Join(cgrouptest.DiskDir(t), "data"), 32*watchMiB)
			if u := watchUsage(t, l, c.Dir); u < 2*tt.below {
				t.Fatalf("usage %d MiB after writing 32 MiB: the page cache was not charged to the cgroup", u/watchMiB)
			}
			w := newWatcher(t, l, watch.WatcherOptions{UsagePoll: poll})
			if tt.first != 0 {
				usage := watchUsage(t, l, c.Dir)
				if err := w.Watch(c.Path, host.Wake{UsageAbove: usage + tt.first}); err != nil {
					t.Fatal(err)
				}
				if awaitReport(w, c.Path, 200*time.Millisecond) {
					t.Fatalf("reported at arming with usage %d MiB below the threshold of %d MiB",
						usage/watchMiB, (usage+tt.first)/watchMiB)
				}
			}
			usage := watchUsage(t, l, c.Dir)
			start := time.Now()
			if err := w.Watch(c.Path, host.Wake{UsageAbove: usage - tt.below}); err != nil {
				t.Fatal(err)
			}
			at, ok := awaitReportAt(w, c.Path, within)
			if !ok {
				t.Fatalf("usage %d MiB, threshold armed at %d MiB: not reported within %v",
					usage/watchMiB, (usage-tt.below)/watchMiB, within)
			}
			t.Logf("reported %v after Watch", at.Sub(start).Round(time.Microsecond))
			// One report per arming: the usage, still above, is not
			// reported again until it falls below and crosses again.
			if awaitReport(w, c.Path, 300*time.Millisecond) {
				t.Errorf("reported twice for one arming")
			}
		})
	}
}

// A watch with no usage threshold reports a cgroup whose writer meets its
// limit: only reclaim (v1 vmpressure and failcnt), memory.events.local or
// PSI (v2) can. With Wake.OnlyArmed, the watch of a cgroup the agent
// looks at anyway, none of them does.
func TestWatchReportsLimitReclaim(t *testing.T) {
	l := cgrouptest.Layout(t)
	disk := cgrouptest.DiskDir(t)
	for _, tt := range []struct {
		name      string
		onlyArmed bool
	}{
		{"reported", false},
		{"OnlyArmed: not reported", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := cgrouptest.New(t, l, 32*watchMiB)
			w := newWatcher(t, l, watch.WatcherOptions{})
			if err := w.Watch(c.Path, host.Wake{UsageAbove: memcg.NoLimit, OnlyArmed: tt.onlyArmed}); err != nil {
				t.Fatal(err)
			}
			// Twice the limit where the whole write is waited for (the
			// VM's disk writes tens of MiB a second).
			count := "count=128"
			if tt.onlyArmed {
				count = "count=64"
			}
			start := time.Now()
			dd := c.Start(t, "dd", "if=/dev/zero", "of="+filepath.Join(disk, "data"), "bs=1M", count)
			if !tt.onlyArmed {
				at, ok := awaitReportAt(w, c.Path, 5*time.Second)
				if !ok {
					t.Fatalf("a 128 MiB writer in a 32 MiB cgroup: not reported within 5s")
				}
				t.Logf("reported %v after the writer started", at.Sub(start).Round(time.Millisecond))
				return
			}
			// A writer the cgroup's OOM killer ended met the limit too:
			// v1 reclaim cannot always clean 32 MiB of dirty pages in
			// time on a loaded host (mem_cgroup_out_of_memory).
			if err := dd.Wait(); err != nil && !killed(err) {
				t.Fatalf("dd: %v", err)
			}
			if failcnt := cgroupFailcnt(t, l, c); failcnt == 0 {
				t.Fatalf("the writer never met the cgroup's limit (failcnt 0): the test shows nothing")
			}
			if awaitReport(w, c.Path, 300*time.Millisecond) {
				t.Errorf("reported with OnlyArmed and no threshold, after a writer met the limit")
			}
		})
	}
}

// killed reports whether err is a process's exit by SIGKILL.
func killed(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// cgroupFailcnt is how often c's charges met its limit: memory.failcnt on
// v1, memory.events' max on v2.
func cgroupFailcnt(t *testing.T, l layout.Layout, c *cgrouptest.Cgroup) uint64 {
	t.Helper()
	if l.Memory.Version == layout.V1 {
		n, err := ctlfile.ReadUint(filepath.Join(c.Dir, "memory.failcnt"))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	b, err := os.ReadFile(filepath.Join(c.Dir, "memory.events"))
	if err != nil {
		t.Fatal(err)
	}
	var e format.MemoryEvents
	if err := format.ParseMemoryEvents(b, &e); err != nil {
		t.Fatal(err)
	}
	return e.Max
}

func TestWatchCoalescesReportsUntilReceived(t *testing.T) {
	l := cgrouptest.Layout(t)
	disk := cgrouptest.DiskDir(t)
	c := cgrouptest.New(t, l, 32*watchMiB)
	w := newWatcher(t, l, watch.WatcherOptions{})
	if err := w.Watch(c.Path, host.Wake{UsageAbove: memcg.NoLimit}); err != nil {
		t.Fatal(err)
	}
	// Reclaim signals the cgroup many times (every 512 pages scanned on
	// v1, every memory.max event on v2) while nobody receives.
	cgrouptest.DirtyFile(t, c, filepath.Join(disk, "data"), 64*watchMiB)
	// Wait past one PSI trigger window (1 s) as well: on v2 the trigger
	// reports a stall up to a window after it, and such a late report is
	// a new one, not one the queue failed to coalesce.
	time.Sleep(1500 * time.Millisecond)
	if !awaitReport(w, c.Path, time.Second) {
		t.Fatal("not reported")
	}
	if awaitReport(w, c.Path, 200*time.Millisecond) {
		t.Error("reported twice: the reports made before the first was received were not coalesced")
	}
	if d := w.Dropped(); d != 0 {
		t.Errorf("Dropped() = %d, want 0", d)
	}
}

// watcherFDs are the Watcher's own file descriptors: its epoll set, the
// eventfd that wakes its loop, and the set's duplicate on the runtime's
// poller (internal/pollfd).
const watcherFDs = 3

// TestWatchReleasesWatchesOfRemovedCgroups removes watched cgroups: each
// is reported once, its watch dropped and its file descriptors closed,
// and the Watcher does not spin on what is left of it.
func TestWatchReleasesWatchesOfRemovedCgroups(t *testing.T) {
	l := cgrouptest.Layout(t)
	parent := cgrouptest.New(t, l, 0)
	a, b := parent.Child(t, "a"), parent.Child(t, "b")
	base := openFiles(t)
	// A queue of one: the second removal's report is dropped.
	w := newWatcher(t, l, watch.WatcherOptions{Queue: 1})
	for _, c := range []*cgrouptest.Cgroup{a, b} {
		if err := w.Watch(c.Path, host.Wake{UsageAbove: watchUsage(t, l, c.Dir) + 8*watchMiB}); err != nil {
			t.Fatal(err)
		}
	}
	armed := openFiles(t)
	own := watcherFDs
	t.Logf("file descriptors: %d for the watcher, %d per watch", own, (armed-base-own)/2)

	for _, c := range []*cgrouptest.Cgroup{a, b} {
		if err := os.Remove(c.Dir); err != nil {
			t.Fatal(err)
		}
	}
	// The loop closes a dropped watch's files just after dropping it.
	deadline := time.Now().Add(reportWithin(l, time.Second))
	for (w.Len() > 0 || openFiles(t) != base+own) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := w.Len(); n != 0 {
		t.Fatalf("%d watches of removed cgroups left after %v", n, reportWithin(l, time.Second))
	}
	if got := openFiles(t); got != base+own {
		t.Errorf("%d file descriptors open after the watches were dropped, want %d (%d before, and the watcher's %d)", got, base+own, base, own)
	}
	// Measured from here, after the removals were reported: the wait
	// above polls /proc/self/fd, which costs CPU of its own (much of it
	// under qemu's emulation), and is no part of the watcher.
	cpu0 := cpuTime(t)
	time.Sleep(time.Second)
	if cpu := cpuTime(t) - cpu0; cpu > 200*time.Millisecond {
		t.Errorf("the process used %v of CPU time in the second after the removals were reported: the watcher spins", cpu)
	}
	select {
	case cg := <-w.Events():
		if cg != a.Path && cg != b.Path {
			t.Errorf("reported %s, want %s or %s", cg, a.Path, b.Path)
		}
	case <-time.After(time.Second):
		t.Error("neither removed cgroup was reported")
	}
	// The second removal's reports are dropped: one per source of its
	// watch that saw the removal before the watch was dropped (on v2 the
	// memory.events.local notification, the PSI trigger's POLLERR and a
	// memory.current poll may each come first), so at least one.
	if d := w.Dropped(); d < 1 || d > 3 {
		t.Errorf("Dropped() = %d, want 1 to 3: two removals, a queue of one, up to 3 sources per watch", d)
	}
}

func TestUnwatchAndCloseReleaseFileDescriptors(t *testing.T) {
	l := cgrouptest.Layout(t)
	parent := cgrouptest.New(t, l, 0)
	var cgs []*cgrouptest.Cgroup
	for i := range 5 {
		cgs = append(cgs, parent.Child(t, "c"+strconv.Itoa(i)))
	}
	base := openFiles(t)
	w, err := watch.NewWatcher(l, watch.WatcherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cgs {
		if err := w.Watch(c.Path, host.Wake{UsageAbove: 64 * watchMiB}); err != nil {
			t.Fatal(err)
		}
		// Moving the threshold replaces the v1 eventfd.
		if err := w.Watch(c.Path, host.Wake{UsageAbove: 32 * watchMiB}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Watch(parent.Path+"/no-such-cgroup", host.Wake{UsageAbove: memcg.NoLimit}); !errors.Is(err, host.ErrVanished) {
		t.Errorf("Watch of a missing cgroup: %v, want an error wrapping host.ErrVanished", err)
	}
	armed := openFiles(t)
	perWatch := float64(armed-base-watcherFDs) / float64(len(cgs))
	t.Logf("%d watches hold %d file descriptors: %.0f per watch, and the watcher %d", len(cgs), armed-base-watcherFDs, perWatch, watcherFDs)
	if perWatch < 1 || perWatch > 3 {
		t.Errorf("%.1f file descriptors per watch, want 1 to 3", perWatch)
	}
	for _, c := range cgs[:3] {
		w.Unwatch(c.Path)
	}
	if got, want := openFiles(t), base+watcherFDs+int(perWatch)*2; got != want {
		t.Errorf("after Unwatch of 3 of 5: %d file descriptors, want %d", got, want)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := openFiles(t); got != base {
		t.Errorf("after Close: %d file descriptors, want %d as before NewWatcher", got, base)
	}
	if _, open := <-w.Events(); open {
		t.Error("Events not closed by Close")
	}
	if err := w.Watch(cgs[4].Path, host.Wake{}); err == nil {
		t.Error("Watch after Close succeeded")
	}
}

var (
	watchSizes = flag.String("watch.sizes", "100,1000,10000", "how many idle cgroups TestWatchIdleCost watches, in turn")
	watchIdle  = flag.Duration("watch.idle", 10*time.Second, "how long TestWatchIdleCost measures each number of watches")
)

// watchCreateBudget bounds the time TestWatchIdleCost spends creating
// cgroups; it watches no more than it could create in that time.
const watchCreateBudget = 2 * time.Minute

// TestWatchIdleCost measures what watching idle cgroups costs: the file
// descriptors, the time to arm a watch, the CPU time and resident memory of
// the whole test process while nothing happens, the kernel memory, and on
// v2 the kernel's psimon threads, with PSI triggers (subtest v2-psi) and
// without (v2-nopsi). It creates the cgroups beneath a test cgroup, as
// many as -watch.sizes asks, fewer if the limit on open files or the time
// budget does not allow them, and prints a table. It is heavy, so it runs
// only when -run names it:
//
//	go test ./cgroupfs -run TestWatchIdleCost -v [-watch.sizes 100,1000,10000] [-watch.idle 10s]
func TestWatchIdleCost(t *testing.T) {
	if !strings.Contains(flag.Lookup("test.run").Value.String(), "TestWatchIdleCost") {
		t.Skip("heavy measurement: runs only when -run names TestWatchIdleCost")
	}
	l := cgrouptest.Layout(t)
	if l.Memory.Version == layout.V1 {
		t.Run("v1", func(t *testing.T) { watchIdleCost(t, l, watch.WatcherOptions{}) })
		return
	}
	t.Run("v2-psi", func(t *testing.T) { watchIdleCost(t, l, watch.WatcherOptions{}) })
	t.Run("v2-nopsi", func(t *testing.T) { watchIdleCost(t, l, watch.WatcherOptions{NoPSI: true}) })
}

func watchIdleCost(t *testing.T, l layout.Layout, opts watch.WatcherOptions) {
	var sizes []int
	for _, f := range strings.Split(*watchSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			t.Fatalf("-watch.sizes %q: want a comma-separated list of positive numbers", *watchSizes)
		}
		sizes = append(sizes, n)
	}
	parent := cgrouptest.New(t, l, 0)
	// On v2 this enables the memory controller for the parent's children.
	parent.Child(t, "first")

	// The cgroups are created here rather than with cgrouptest, which
	// would mirror each one in the unified and freezer hierarchies of a
	// hybrid host; they are removed in reverse order.
	var cgs []host.Cgroup
	t.Cleanup(func() {
		start := time.Now()
		for i := len(cgs) - 1; i >= 0; i-- {
			if err := os.Remove(l.Memory.Dir(cgs[i])); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("cleanup: %v", err)
			}
		}
		t.Logf("removed %d cgroups in %v", len(cgs), time.Since(start).Round(time.Millisecond))
	})
	var created time.Duration
	create := func(n int) {
		start := time.Now()
		for len(cgs) < n && created+time.Since(start) < watchCreateBudget {
			cg := host.Cgroup(string(parent.Path) + "/w" + strconv.Itoa(len(cgs)))
			if err := os.Mkdir(l.Memory.Dir(cg), 0o755); err != nil {
				t.Fatal(err)
			}
			cgs = append(cgs, cg)
		}
		created += time.Since(start)
	}

	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	perWatch := 3 // at most, until measured
	type row struct {
		watches, fds    int
		arm, cpu, close time.Duration
		wall            time.Duration
		rss, kernel     uint64
		allocs          uint64
		psimon, reports int
	}
	var rows []row
	measure := func(n int) row {
		base, kernel0 := openFiles(t), watchKernelMemory(t)
		w, err := watch.NewWatcher(l, opts)
		if err != nil {
			t.Fatal(err)
		}
		r := row{watches: n}
		start := time.Now()
		for _, cg := range cgs[:n] {
			// Empty cgroups: a threshold none reaches, which v2 polls.
			if err := w.Watch(cg, host.Wake{UsageAbove: 64 * watchMiB}); err != nil {
				t.Fatal(err)
			}
		}
		r.arm = time.Since(start)
		r.fds = openFiles(t) - base
		r.psimon = watchPsimonThreads(t)
		r.kernel = watchKernelMemory(t) - kernel0
		reports := make(chan int)
		go func() {
			n := 0
			for range w.Events() {
				n++
			}
			reports <- n
		}()
		time.Sleep(time.Second) // let arming's aftermath settle
		goruntime.GC()
		var m0, m1 goruntime.MemStats
		goruntime.ReadMemStats(&m0)
		cpu0, wall0 := cpuTime(t), time.Now()
		time.Sleep(*watchIdle)
		r.cpu, r.wall = cpuTime(t)-cpu0, time.Since(wall0)
		goruntime.ReadMemStats(&m1)
		r.allocs = m1.Mallocs - m0.Mallocs
		r.rss = watchRSS(t)
		start = time.Now()
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r.close = time.Since(start)
		r.reports = <-reports
		return r
	}

	rows = append(rows, measure(0))
	for _, n := range sizes {
		if room := (int(lim.Cur) - openFiles(t) - 64) / perWatch; n > room {
			t.Logf("%d watches of %d file descriptors each would exceed RLIMIT_NOFILE %d: measuring %d", n, perWatch, lim.Cur, room)
			n = room
		}
		create(n)
		if len(cgs) < n {
			t.Logf("created %d cgroups in the budget of %v: measuring %d watches, not %d", len(cgs), watchCreateBudget, len(cgs), n)
			n = len(cgs)
		}
		r := measure(n)
		if n > 0 {
			perWatch = max(1, (r.fds-2+n-1)/n) // the watcher's own two aside
		}
		rows = append(rows, r)
		if r.reports != 0 {
			t.Errorf("%d idle watches: %d reports", n, r.reports)
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "cgroup %s, %d CPUs, PSI triggers %v, %d cgroups created in %v (%v each), idle %v per row\n",
		l.Memory.Version, goruntime.NumCPU(), l.Memory.Version == layout.V2 && !opts.NoPSI, len(cgs),
		created.Round(time.Millisecond), (created / time.Duration(max(1, len(cgs)))).Round(time.Microsecond), *watchIdle)
	fmt.Fprintf(&b, "| watches | open fds (the watcher's 3 included) | arm per watch | close | CPU per s | %% of a core | heap allocs | RSS | kernel memory (unreclaimable) | psimon threads | reports |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		perSec := time.Duration(float64(r.cpu) / r.wall.Seconds())
		var arm time.Duration
		if r.watches > 0 {
			arm = r.arm / time.Duration(r.watches)
		}
		fmt.Fprintf(&b, "| %d | %d | %v | %v | %v | %.3f%% | %d | %.1f MiB | %+.1f MiB | %d | %d |\n",
			r.watches, r.fds, arm.Round(time.Microsecond), r.close.Round(time.Millisecond),
			perSec.Round(time.Microsecond), 100*perSec.Seconds(), r.allocs, float64(r.rss)/watchMiB,
			float64(int64(r.kernel))/watchMiB, r.psimon, r.reports)
	}
	t.Log("\n" + b.String())
}

// watchRSS is the test process's resident set, from /proc/self/status.
func watchRSS(t testing.TB) uint64 {
	return watchProcKB(t, "/proc/self/status", "VmRSS:")
}

// watchKernelMemory is the kernel's unreclaimable slab and kernel stacks,
// from /proc/meminfo: where eventfds, open files, memcg events and psimon
// threads live (the dentries and inodes of the files opened are
// reclaimable slab, left out).
func watchKernelMemory(t testing.TB) uint64 {
	return watchProcKB(t, "/proc/meminfo", "SUnreclaim:") + watchProcKB(t, "/proc/meminfo", "KernelStack:")
}

// watchProcKB reads the "key   N kB" line of a /proc file, in bytes.
func watchProcKB(t testing.TB, file, key string) uint64 {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			f := strings.Fields(rest)
			kb, err := strconv.ParseUint(f[0], 10, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", file, line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("%s: no %s line", file, key)
	return 0
}

// watchPsimonThreads counts the kernel's PSI poll threads, one per cgroup
// with a privileged trigger.
func watchPsimonThreads(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err == nil && strings.TrimSpace(string(b)) == "psimon" {
			n++
		}
	}
	return n
}

// BenchmarkWatchUsageRead measures what the v2 usage poll costs per cgroup:
// one pread(2) of an open usage file into a reused buffer, and its parse.
// memory.current (v2) and memory.usage_in_bytes (v1) take the same path in
// the kernel (a cftype read_u64 of page_counter_read, printed through
// cgroup_seqfile_show), so a v1 host measures it as well.
func BenchmarkWatchUsageRead(b *testing.B) {
	l := cgrouptest.Layout(b)
	c := cgrouptest.New(b, l, 0)
	file := "memory.current"
	if l.Memory.Version == layout.V1 {
		file = "memory.usage_in_bytes"
	}
	fd, err := unix.Open(filepath.Join(c.Dir, file), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 4096)
	b.ReportAllocs()
	for b.Loop() {
		n, err := unix.Pread(fd, buf, 0)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := format.ParseUint(buf[:n]); err != nil {
			b.Fatal(err)
		}
	}
}
