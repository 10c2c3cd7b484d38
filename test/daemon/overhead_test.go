package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/internal/sandbox"
)

// The target for the daemon idle over the seed's 10,000 cgroups.
const (
	targetCPU = 0.01     // CPU seconds per wall second: 1 % of one core
	targetRSS = 64 * mib // resident bytes
)

// userHZ is the unit of utime and stime in /proc/PID/stat: USER_HZ, 100
// on every architecture Linux exports it for (include/asm-generic/param.h).
const userHZ = 100

// TestOverhead measures the daemon idle over N empty limited cgroups: its
// CPU seconds per wall second and its peak resident memory, at 100, 1,000
// and 10,000 cgroups, the seed's count, where the target is under
// 1 % of one core and under 64 MiB. It creates the cgroups (and times
// that), starts a daemon managing them, waits for it to settle (every
// cgroup listed and stepped once, its CPU time flat), then reads its CPU
// time (/proc/PID/stat utime+stime) over an idle window and its peak RSS
// (VmHWM in /proc/PID/status), and prints a table (docs/lab/2026-11-30-overhead.md).
//
// It is heavy (tens of thousands of cgroupfs writes, minutes of wall
// time), so it runs only with MEMCGD_OVERHEAD=1; MEMCGD_OVERHEAD_SIZES
// (e.g. "100,1000") and MEMCGD_OVERHEAD_WINDOW (e.g. "60s") change the
// sizes and the window. The targets are checked at the largest size when
// it is at least 10,000.
//
//	MEMCGD_OVERHEAD=1 go test ./test/daemon -run TestOverhead -v -timeout 30m
//
// and in the cgroup v2 test VM (docs/lab/raw/issue7-vm.md):
//
//	go run ./test/vm/cmd/vmrun -cgroup v2 -mem 4096 -timeout 25m -env MEMCGD_OVERHEAD=1 \
//		-env MEMCGD_OVERHEAD_SIZES=10000 -env MEMCGD_OVERHEAD_WINDOW=30s -pkg ./test/daemon -run 'TestOverhead$'
func TestOverhead(t *testing.T) {
	if os.Getenv("MEMCGD_OVERHEAD") != "1" {
		t.Skip("heavy (creates 10,000 cgroups and measures for minutes): set MEMCGD_OVERHEAD=1 to run it")
	}
	l := cgrouptest.Layout(t)
	sizes := overheadSizes(t)
	window := 30 * time.Second
	if s := os.Getenv("MEMCGD_OVERHEAD_WINDOW"); s != "" {
		var err error
		if window, err = time.ParseDuration(s); err != nil || window < time.Second {
			t.Fatalf("MEMCGD_OVERHEAD_WINDOW=%q: want a duration of at least 1s", s)
		}
	}

	raiseFileLimit(t, deployFileLimit)

	parent := cgrouptest.New(t, l, 0)
	// The children are made with os.Mkdir, not parent.Child (10,000
	// cleanups): on v2 they get memory files only once the parent's
	// cgroup.subtree_control enables memory, which Child would have done.
	if l.Memory.Version == layout.V2 {
		if err := sandbox.EnableControllers(parent.Dir); err != nil {
			t.Fatalf("enable controllers for %s's children: %v", parent.Dir, err)
		}
	}
	var made []string
	// Registered after New's, so it runs first: the children go before
	// their parent.
	t.Cleanup(func() {
		start := time.Now()
		for _, dir := range made {
			if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("cleanup: %v", err)
			}
		}
		t.Logf("removed %d cgroups in %v", len(made), time.Since(start).Round(time.Millisecond))
	})

	type row struct {
		n                     int
		create, ready, settle time.Duration
		settleCPU, idleCPU    time.Duration
		wall                  time.Duration
		rss, hwm              uint64
		anon, file            uint64 // of rss: anonymous (the Go heap, stacks) and file-backed (the binary)
		fds                   int
		stat                  time.Duration // a stat of every cgroup
		statHWM               uint64        // peak RSS after it
	}
	var rows []row
	for _, n := range sizes {
		r := row{n: n}
		start := time.Now()
		for i := len(made); i < n; i++ {
			dir := filepath.Join(parent.Dir, fmt.Sprintf("c%05d", i))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			made = append(made, dir)
			writeFile(t, filepath.Join(dir, limitFile(l)), strconv.Itoa(64*mib))
		}
		r.create = time.Since(start)

		d := newDaemon(t, fmt.Sprintf("version: 1\nmanage: {under: %s, limited_only: true}\n", parent.Path))
		start = time.Now()
		d.start()
		r.ready = time.Since(start)
		pid := d.PID()
		// Settled: every cgroup stepped once, which arms its watch (one
		// eventfd on v1, two or three files on v2), and no CPU time spent
		// for a second. Asking the daemon would be no good: a stat of
		// thousands of cgroups is itself megabytes of work.
		if _, ok := poll(5*time.Minute, 100*time.Millisecond, func() bool { return openFiles(t, pid) >= n }); !ok {
			t.Fatalf("%d cgroups: the daemon holds %d files after 5 minutes, want a watch of each", n, openFiles(t, pid))
		}
		last := cpuTime(t, pid)
		for flat := false; !flat; {
			if time.Since(start) > 5*time.Minute {
				t.Fatalf("%d cgroups: the daemon's CPU time still grows after 5 minutes", n)
			}
			time.Sleep(time.Second)
			now := cpuTime(t, pid)
			flat, last = now-last <= 10*time.Millisecond, now
		}
		r.settle = time.Since(start)
		r.settleCPU = last

		cpu0, wall0 := cpuTime(t, pid), time.Now()
		time.Sleep(window)
		r.idleCPU, r.wall = cpuTime(t, pid)-cpu0, time.Since(wall0)
		r.rss, r.hwm, r.anon, r.file = memory(t, pid)
		r.fds = openFiles(t, pid)
		// One `memcgd stat` of every cgroup, after the measurement: the
		// daemon builds the whole answer in memory.
		statStart := time.Now()
		if got, err := d.managedCount(); err != nil || got != n+1 {
			t.Errorf("%d cgroups: the daemon reports %d (%v), want %d: the parent and its children", n, got, err, n+1)
		}
		r.stat = time.Since(statStart)
		_, r.statHWM, _, _ = memory(t, pid)
		d.stop()
		rows = append(rows, r)
		t.Logf("%d cgroups: idle %.3f%% of a core, RSS %d MiB (peak %d MiB)", n,
			100*r.idleCPU.Seconds()/r.wall.Seconds(), r.rss/mib, r.hwm/mib)
	}

	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "cgroups\tcreate\tready\tsettled\tsettle CPU\tidle CPU s/s\tRSS MiB\tanon MiB\tfile MiB\tpeak RSS MiB\topen fds\tstat all\tpeak RSS after MiB\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%v\t%v\t%v\t%v\t%.5f\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t%v\t%.1f\t\n", r.n,
			r.create.Round(time.Millisecond), r.ready.Round(time.Millisecond), r.settle.Round(100*time.Millisecond),
			r.settleCPU.Round(10*time.Millisecond), r.idleCPU.Seconds()/r.wall.Seconds(),
			float64(r.rss)/mib, float64(r.anon)/mib, float64(r.file)/mib, float64(r.hwm)/mib, r.fds, r.stat.Round(time.Millisecond), float64(r.statHWM)/mib)
	}
	tw.Flush()
	t.Logf("memcgd run idle over N empty cgroups with a limit, cgroup %s, idle window %v:\n%s", l.Memory.Version, window, b.String())

	if last := rows[len(rows)-1]; last.n >= 10000 {
		if cpu := last.idleCPU.Seconds() / last.wall.Seconds(); cpu >= targetCPU {
			t.Errorf("%d cgroups: idle CPU %.4f s/s, want under %.2f (1%% of one core)", last.n, cpu, targetCPU)
		}
		if last.hwm >= targetRSS {
			t.Errorf("%d cgroups: peak RSS %d MiB, want under %d MiB", last.n, last.hwm/mib, targetRSS/mib)
		}
	}
}

// deployFileLimit is deploy/memcgd.service's LimitNOFILE: a watch holds
// one file on v1 and up to three on v2, so 10,000 cgroups need more than
// the kernel's default hard limit of 4096, which the test VM's init
// leaves in force.
const deployFileLimit = 1 << 20

// raiseFileLimit raises this process's RLIMIT_NOFILE, soft and hard, to
// n when its hard limit is lower, so that the daemon it starts inherits
// what the unit gives it (its Go runtime raises its soft limit to the
// hard one). Raising the hard limit takes CAP_SYS_RESOURCE (root in the
// VM); without it the test goes on at the limit it has, and a daemon out
// of files fails it later by name.
func raiseFileLimit(t *testing.T, n uint64) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatalf("getrlimit RLIMIT_NOFILE: %v", err)
	}
	if old.Max >= n {
		return
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: n}); err != nil {
		t.Logf("raise RLIMIT_NOFILE from %d/%d to %d as deploy/memcgd.service does: %v; going on at %d", old.Cur, old.Max, n, err, old.Max)
		return
	}
	t.Logf("raised RLIMIT_NOFILE from %d/%d to %d, deploy/memcgd.service's LimitNOFILE", old.Cur, old.Max, n)
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// overheadSizes are the cgroup counts measured, ascending:
// $MEMCGD_OVERHEAD_SIZES or 100, 1,000 and 10,000.
func overheadSizes(t *testing.T) []int {
	t.Helper()
	s := os.Getenv("MEMCGD_OVERHEAD_SIZES")
	if s == "" {
		return []int{100, 1000, 10000}
	}
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || len(sizes) > 0 && n <= sizes[len(sizes)-1] {
			t.Fatalf("MEMCGD_OVERHEAD_SIZES=%q: want ascending positive counts such as 100,1000,10000", s)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// cpuTime is the CPU time pid's threads have used, user and system, from
// /proc/PID/stat (fs/proc/array.c do_task_stat: utime and stime, fields
// 14 and 15, summed over the thread group, exited threads included).
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): utime is field 14, f[11].
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatalf("/proc/%d/stat: %v", pid, err)
	}
	return time.Duration(utime+stime) * time.Second / userHZ
}

// memory returns pid's resident set and its peak, VmRSS and VmHWM of
// /proc/PID/status, and of the resident set the anonymous and the
// file-backed parts (RssAnon, RssFile), in bytes.
func memory(t *testing.T, pid int) (rss, hwm, anon, file uint64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		name, v, ok := strings.Cut(line, ":")
		var to *uint64
		switch name {
		case "VmRSS":
			to = &rss
		case "VmHWM":
			to = &hwm
		case "RssAnon":
			to = &anon
		case "RssFile":
			to = &file
		}
		if !ok || to == nil {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			t.Fatalf("/proc/%d/status: %s: %v", pid, name, err)
		}
		*to = kb << 10
	}
	return rss, hwm, anon, file
}

// openFiles counts pid's open file descriptors.
func openFiles(t *testing.T, pid int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}
