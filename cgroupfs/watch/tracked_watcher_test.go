package watch_test

import (
	"errors"
	"flag"
	"fmt"
	"os"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/dirtytrack"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/cgroupfs/watch"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/internal/stats"
	"github.com/memcgd/memcgd/memcg"
)

var (
	fastCgroups = flag.Int("fastpath.cgroups", 10000, "cgroups TestTrackedWatcherIdleCost watches")
	fastIdle    = flag.Duration("fastpath.idle", 10*time.Second, "idle window of TestTrackedWatcherIdleCost")
	fastAbove   = flag.Uint64("fastpath.above", 64<<20, "UsageAbove of each idle cgroup in TestTrackedWatcherIdleCost, bytes")
	fastProbe   = flag.Duration("fastpath.probe", 3*time.Second, "how long TestTrackedWatcherIdleCost times the Watcher's lock after the idle window")
)

// TestTrackedWatcherIdleCost measures what watching -fastpath.cgroups idle
// cgroups costs through FS.NewWatcher, in three modes: the fallback (no
// tracker: PSI trigger on v2, usage threshold or poll), the tracker with
// the usage watch kept (the reclaim watermarks need it: the tracker sees
// only dirtying), and the tracker alone (UsageAbove unset, as for a cgroup
// with its watermarks disabled); tracker+usage-2s reads every cgroup's
// usage every 2 s, the fixed poll before the adaptive schedule, to show
// what the schedule saves and how long the lock is held meanwhile. After
// the idle window it takes and releases the Watcher's lock (Len) every
// millisecond for -fastpath.probe: the wait a tracker wake-up sees.
// Every cgroup is armed as the agent would:
// Dirtied, then Watch with a DirtiedAbove 1 MiB on. It prints the test
// process's CPU time per second, the psimon threads and their CPU time,
// open files, RSS and kernel memory. Heavy: it runs only when -run names
// it. Its modes are subtests: fallback (no tracker: PSI trigger on v2,
// usage watch), tracker+usage, tracker-alone; the VM's two-minute limit
// per test binary fits one or two at 10,000 cgroups.
//
//	go test ./cgroupfs -run TestTrackedWatcherIdleCost -v [-fastpath.cgroups 10000] [-fastpath.idle 10s]
//	go run ./test/vm/cmd/vmrun -cgroup v2 -mem 4096 -pkg ./cgroupfs -run 'TestTrackedWatcherIdleCost/tracker'
func TestTrackedWatcherIdleCost(t *testing.T) {
	if !strings.Contains(flag.Lookup("test.run").Value.String(), "TestTrackedWatcherIdleCost") {
		t.Skip("heavy measurement: runs only when -run names TestTrackedWatcherIdleCost")
	}
	l := cgrouptest.Layout(t)
	tr := cgrouptest.LoadTracker(t)
	n := *fastCgroups
	perWatch := 3 // v2: memory.events.local, memory.current, memory.pressure
	if l.Memory.Version == layout.V1 {
		perWatch = 1 // one eventfd
	}
	raiseNoFile(t, uint64(perWatch*n+1024))

	parent := cgrouptest.New(t, l, 0)
	parent.Child(t, "first") // on v2, enables memory for the children
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
	start := time.Now()
	for i := range n {
		cg := host.Cgroup(string(parent.Path) + "/f" + strconv.Itoa(i))
		if err := os.Mkdir(l.Memory.Dir(cg), 0o755); err != nil {
			t.Fatal(err)
		}
		cgs = append(cgs, cg)
	}
	t.Logf("created %d cgroups in %v", n, time.Since(start).Round(time.Millisecond))

	type row struct {
		mode                string
		arm, cpu, wall      time.Duration
		reads               float64 // memory.current reads per second
		wait50, wait99, max time.Duration
		psimon              int
		psimonCPU           time.Duration
		fds                 int
		rss, kernel         uint64
		reports, pollsArmed int
	}
	var rows []row
	for _, mode := range []struct {
		name    string
		tracker *dirtytrack.Tracker
		above   uint64 // UsageAbove; 0: none
		opts    watch.WatcherOptions
	}{
		{"fallback", nil, *fastAbove, watch.WatcherOptions{}},
		{"tracker+usage", tr, *fastAbove, watch.WatcherOptions{}},
		// A cgroup of a 1 GiB limit: the watermark wake sits about its
		// limit above an idle, empty cgroup.
		{"tracker+usage-1GiB", tr, 1 << 30, watch.WatcherOptions{}},
		{"tracker+usage-2s", tr, *fastAbove, watch.WatcherOptions{UsagePoll: 2 * time.Second, MinUsagePoll: 2 * time.Second}},
		{"tracker-alone", tr, 0, watch.WatcherOptions{}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			fds0, kernel0 := openFiles(t), watchKernelMemory(t)
			fs := cgrouptest.FS(t, l, "/", nil, mode.tracker)
			w, err := fs.NewWatcher(mode.opts)
			if err != nil {
				t.Fatal(err)
			}
			r := row{mode: mode.name}
			start := time.Now()
			for _, cg := range cgs {
				wake := host.Wake{UsageAbove: memcg.NoLimit}
				if mode.above != 0 {
					wake.UsageAbove = mode.above // an empty cgroup never reaches it
				}
				if mode.tracker != nil {
					d, err := fs.DirtyCounts(t.Context(), cg)
					if err != nil {
						t.Fatal(err)
					}
					wake.DirtiedAbove = d.Dirtied + 1<<20
				}
				if err := w.Watch(cg, wake); err != nil {
					t.Fatal(err)
				}
			}
			r.arm = time.Since(start)
			r.fds = openFiles(t) - fds0
			r.kernel = watchKernelMemory(t) - kernel0
			reports := make(chan int)
			go func() {
				k := 0
				for range w.Events() {
					k++
				}
				reports <- k
			}()
			time.Sleep(time.Second)
			goruntime.GC()
			ps0 := psimonCPU(t)
			// At least the longest interval between two reads of a
			// cgroup, so that each is read in the window.
			idle := *fastIdle
			if mode.above != 0 {
				longest, err := mode.opts.UsagePollInterval(mode.above)
				if err != nil {
					t.Fatal(err)
				}
				idle = max(idle, longest)
			}
			cpu0, wall0, reads0 := cpuTime(t), time.Now(), w.UsageReads()
			time.Sleep(idle)
			r.cpu, r.wall = cpuTime(t)-cpu0, time.Since(wall0)
			r.reads = float64(w.UsageReads()-reads0) / r.wall.Seconds()
			ps1 := psimonCPU(t)
			r.psimon, r.psimonCPU = len(ps1), sumNew(ps0, ps1)
			r.rss = watchRSS(t)
			r.wait50, r.wait99, r.max = lockWait(w, *fastProbe)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			r.reports = <-reports
			if mode.tracker != nil {
				// Stop counting, so that the next mode starts clean.
				for _, cg := range cgs {
					fs.Forget(cg)
				}
			}
			rows = append(rows, r)
			if r.reports != 0 {
				t.Errorf("%s: %d reports of idle cgroups", mode.name, r.reports)
			}
		})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cgroup %s, %d CPUs, %d idle cgroups, idle %v per row or the longest read interval\n", l.Memory.Version, goruntime.NumCPU(), n, *fastIdle)
	fmt.Fprintf(&b, "UsageAbove %d MiB unless the mode says; lock wait: Len() every 1 ms for %v after the idle window\n", *fastAbove>>20, *fastProbe)
	fmt.Fprintf(&b, "| mode | arm per cgroup | CPU per s (process) | %% of a core | usage reads/s | lock wait p50 / p99 / max | psimon threads | their CPU per s | open fds | RSS | kernel memory | reports |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		per := time.Duration(float64(r.cpu) / r.wall.Seconds())
		psPer := time.Duration(float64(r.psimonCPU) / r.wall.Seconds())
		fmt.Fprintf(&b, "| %s | %v | %v | %.3f%% | %.0f | %v / %v / %v | %d | %v | %d | %.1f MiB | %+.1f MiB | %d |\n",
			r.mode, (r.arm / time.Duration(max(1, n))).Round(time.Microsecond), per.Round(time.Microsecond),
			100*per.Seconds(), r.reads, r.wait50.Round(time.Microsecond), r.wait99.Round(time.Microsecond), r.max.Round(time.Microsecond),
			r.psimon, psPer.Round(time.Microsecond), r.fds, float64(r.rss)/(1<<20),
			float64(int64(r.kernel))/(1<<20), r.reports)
	}
	t.Log("\n" + b.String())
}

// lockWait takes and releases w's lock (Len) every millisecond for d and
// returns the median, 99th percentile and longest time a call took: what
// a tracker wake-up, which takes the same lock, waits.
func lockWait(w *cgroupfs.TrackedWatcher, d time.Duration) (p50, p99, most time.Duration) {
	var waits []time.Duration
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Millisecond) {
		start := time.Now()
		w.Len()
		waits = append(waits, time.Since(start))
	}
	if len(waits) == 0 {
		return 0, 0, 0
	}
	slices.Sort(waits)
	return stats.Median(waits), stats.Percentile(waits, 99), waits[len(waits)-1]
}

// raiseNoFile raises RLIMIT_NOFILE to at least n, the hard limit too when
// the process may (CAP_SYS_RESOURCE, root in the VM).
func raiseNoFile(t *testing.T, n uint64) {
	t.Helper()
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur >= n {
		return
	}
	old := lim
	if lim.Max >= n {
		lim.Cur = n // no privilege needed
	} else {
		lim.Cur, lim.Max = n, n
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("raise RLIMIT_NOFILE from %d/%d to %d: %v", old.Cur, old.Max, n, err)
	}
	t.Cleanup(func() { _ = unix.Setrlimit(unix.RLIMIT_NOFILE, &old) })
}

// psimonCPU returns the CPU time of each psimon kernel thread, by PID.
func psimonCPU(t *testing.T) map[string]time.Duration {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Duration{}
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if i < 0 || j < i || s[i+1:j] != "psimon" {
			continue
		}
		f := strings.Fields(s[j+2:]) // state is field 3; utime, stime fields 14, 15
		u, _ := strconv.ParseUint(f[11], 10, 64)
		st, _ := strconv.ParseUint(f[12], 10, 64)
		out[e.Name()] = time.Duration(u+st) * (time.Second / 100) // USER_HZ
	}
	return out
}

// sumNew sums the CPU time the threads of b used since a (new ones from
// 0).
func sumNew(a, b map[string]time.Duration) time.Duration {
	var d time.Duration
	for pid, v := range b {
		d += v - a[pid]
	}
	return d
}
