package watch_test

import (
	"bytes"
	"errors"
	"log/slog"
	"maps"
	"os"
	"path"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/cgroupfs/watch"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/internal/sandbox"
	"github.com/memcgd/memcgd/internal/stats"
)

// reportBound is how soon a new or removed cgroup must be reported: issue
// 7's 100 ms on the host. In the test VM (MEMCGD_VM=1) qemu emulates the
// CPUs (TCG) with threads of this shared host, and whole vCPUs stall for
// 100-400 ms at a time (measured: the last cgroup of a chain, made while
// the creator then waited, reported 411 ms late): there only a report
// within a second is required, and the distribution is printed.
func reportBound() time.Duration {
	if os.Getenv("MEMCGD_VM") == "1" {
		return time.Second
	}
	return 100 * time.Millisecond
}

// received is a report and when it arrived.
type received struct {
	ev watch.CgroupEvent
	at time.Time
}

// collect receives w's reports in the background until w is closed.
func collect(w *watch.NewCgroups) <-chan received {
	out := make(chan received, 1<<16)
	go func() {
		defer close(out)
		for ev := range w.Events() {
			out <- received{ev, time.Now()}
		}
	}()
	return out
}

// await receives reports until want holds every one of keys or timeout
// passes, and returns what arrived for each key.
func await(t *testing.T, in <-chan received, n int, timeout time.Duration) []received {
	t.Helper()
	var got []received
	deadline := time.After(timeout)
	for len(got) < n {
		select {
		case r := <-in:
			got = append(got, r)
		case <-deadline:
			return got
		}
	}
	// Anything more that arrives soon after is a duplicate or a stray.
	select {
	case r := <-in:
		got = append(got, r)
	case <-time.After(50 * time.Millisecond):
	}
	return got
}

// mkdirs creates the cgroups in order, the parents first, and returns when
// each mkdir returned; at cleanup it removes them, the children first.
func mkdirs(t *testing.T, l layout.Layout, cgs []host.Cgroup) map[host.Cgroup]time.Time {
	t.Helper()
	t.Cleanup(func() {
		for i := len(cgs) - 1; i >= 0; i-- {
			if err := rmdir(l.Memory.Dir(cgs[i])); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	at := make(map[host.Cgroup]time.Time, len(cgs))
	for _, cg := range cgs {
		if err := os.Mkdir(l.Memory.Dir(cg), 0o755); err != nil {
			t.Fatal(err)
		}
		at[cg] = time.Now()
	}
	return at
}

// rmdir removes a cgroup directory, waiting out the EBUSY of a parent whose
// child is still going offline (kernel/cgroup/cgroup.c css_killed_work_fn).
func rmdir(dir string) error {
	deadline := time.Now().Add(sandbox.Settle)
	for {
		err := os.Remove(dir)
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkReports checks that each cgroup of want was reported exactly once,
// as removed or created, within reportBound() of its mkdir or rmdir
// returning, and nothing else; it logs the latency distribution.
func checkReports(t *testing.T, what string, got []received, want map[host.Cgroup]time.Time, removed bool) {
	t.Helper()
	seen := map[host.Cgroup]int{}
	var lat []time.Duration
	for _, r := range got {
		at, ok := want[r.ev.Cgroup]
		if !ok || r.ev.Rescan || r.ev.Removed != removed {
			t.Errorf("%s: unexpected report %+v", what, r.ev)
			continue
		}
		seen[r.ev.Cgroup]++
		d := max(r.at.Sub(at), 0) // the report may beat mkdir's return to the test
		lat = append(lat, d)
		if d > reportBound() {
			t.Errorf("%s: %s reported %v after, want within %v", what, r.ev.Cgroup, d, reportBound())
		}
	}
	for cg := range want {
		if seen[cg] != 1 {
			t.Errorf("%s: %s reported %d times, want once", what, cg, seen[cg])
		}
	}
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return stats.Percentile(lat, 100*p).Round(time.Microsecond) }
	t.Logf("%s: %d reports; latency p50 %v, p90 %v, p99 %v, max %v", what, len(lat), q(0.5), q(0.9), q(0.99), q(1))
}

// chains names n chains a, a/b, a/b/c beneath p.
func chains(p host.Cgroup, n int) [][]host.Cgroup {
	var cs [][]host.Cgroup
	for i := range n {
		a := host.Cgroup(path.Join(string(p), "a"+strconv.Itoa(i)))
		cs = append(cs, []host.Cgroup{a, a + "/b", a + "/b/c"})
	}
	return cs
}

// Every cgroup created beneath the watched one is reported within 100 ms,
// also one created beneath another a moment after it, before its watch
// can be in place; so is every removal.
//
// Each chain a, a/b, a/b/c is made in immediate succession, and the next
// only once the chain is reported: the creator shares the test process,
// and on the VM's one emulated CPU, where a mkdir takes tens of
// milliseconds of CPU in the kernel, a creator that never paused kept the
// watcher from running for up to 191 ms, which says nothing of a daemon.
func TestNewCgroupsReportsEachWithin100ms(t *testing.T) {
	l := cgrouptest.Layout(t)
	p := cgrouptest.New(t, l, 0)
	w, err := watch.WatchNewCgroups(l.Memory, p.Path, watch.NewCgroupsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	in := collect(w)

	cs := chains(p.Path, 40)
	created := map[host.Cgroup]time.Time{}
	var got []received
	for _, c := range cs {
		maps.Copy(created, mkdirs(t, l, c))
		got = append(got, await(t, in, len(c), 10*time.Second)...)
	}
	checkReports(t, "created", got, created, false)
	if got, want := w.Watches(), 1+len(created); got != want {
		t.Errorf("Watches() = %d, want %d (the parent and each new cgroup)", got, want)
	}

	removed := map[host.Cgroup]time.Time{}
	got = nil
	for _, c := range cs {
		for i := len(c) - 1; i >= 0; i-- {
			if err := rmdir(l.Memory.Dir(c[i])); err != nil {
				t.Fatal(err)
			}
			removed[c[i]] = time.Now()
		}
		got = append(got, await(t, in, len(c), 10*time.Second)...)
	}
	checkReports(t, "removed", got, removed, true)
	if got := w.Watches(); got != 1 {
		t.Errorf("Watches() = %d after the removals, want 1 (the parent)", got)
	}
	if w.Dropped() != 0 || !w.Complete() {
		t.Errorf("Dropped() = %d, Complete() = %v; want 0, true", w.Dropped(), w.Complete())
	}
}

// Past MaxWatches the watcher says so once, in the log and by Complete, and
// still reports a cgroup created beneath a watched one.
func TestNewCgroupsBoundsItsWatches(t *testing.T) {
	l := cgrouptest.Layout(t)
	p := cgrouptest.New(t, l, 0)
	old := mkdirs(t, l, []host.Cgroup{p.Path + "/x1", p.Path + "/x2", p.Path + "/x3"})
	var log bytes.Buffer
	w, err := watch.WatchNewCgroups(l.Memory, p.Path, watch.NewCgroupsOptions{
		MaxWatches: 2, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	in := collect(w)
	if w.Watches() != 2 || w.Complete() {
		t.Errorf("with %d cgroups and MaxWatches 2: Watches() = %d, Complete() = %v; want 2, false", 1+len(old), w.Watches(), w.Complete())
	}
	created := mkdirs(t, l, []host.Cgroup{p.Path + "/new"})
	checkReports(t, "created past the limit", await(t, in, 1, 10*time.Second), created, false)
	if n := strings.Count(log.String(), "no more inotify watches"); n != 1 {
		t.Errorf("log holds the notice %d times, want once:\n%s", n, log.String())
	}
	t.Logf("log: %s", log.String())
}

// A receiver that falls behind loses reports, never blocks the watcher,
// and is told to rescan once there is room.
func TestNewCgroupsAsksForARescanWhenTheReceiverFallsBehind(t *testing.T) {
	l := cgrouptest.Layout(t)
	p := cgrouptest.New(t, l, 0)
	w, err := watch.WatchNewCgroups(l.Memory, p.Path, watch.NewCgroupsOptions{Queue: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var cgs []host.Cgroup
	for _, n := range []string{"r1", "r2", "r3", "r4", "r5"} {
		cgs = append(cgs, host.Cgroup(path.Join(string(p.Path), n)))
	}
	mkdirs(t, l, cgs)
	for deadline := time.Now().Add(10 * time.Second); w.Dropped() == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("5 new cgroups with a queue of 2 and no receiver: Dropped() = 0")
		}
		time.Sleep(time.Millisecond)
	}
	var got []watch.CgroupEvent
	timeout := time.After(10 * time.Second)
	for !slices.ContainsFunc(got, func(e watch.CgroupEvent) bool { return e.Rescan }) {
		select {
		case ev := <-w.Events():
			got = append(got, ev)
		case <-timeout:
			t.Fatalf("no Rescan after %d drops; got %+v", w.Dropped(), got)
		}
	}
	t.Logf("dropped %d; received %+v", w.Dropped(), got)
	if r := got[len(got)-1]; r.Cgroup != p.Path {
		t.Errorf("Rescan of %s, want the watched subtree %s", r.Cgroup, p.Path)
	}
}

// kmem reads the kernel memory charged to the test process's own memory
// cgroup (v1 memory.kmem.usage_in_bytes, v2 memory.stat kernel), where the
// kernel charges an inotify group's watches (fs/notify/inotify/
// inotify_user.c inotify_new_watch, GFP_KERNEL_ACCOUNT).
func kmem(b *testing.B, l layout.Layout) uint64 {
	b.Helper()
	self, err := layout.Self("/proc", l)
	if err != nil {
		b.Fatal(err)
	}
	dir := l.Memory.Dir(self)
	if l.Memory.Version == layout.V1 {
		s, err := ctlfile.Read(dir + "/memory.kmem.usage_in_bytes")
		if err != nil {
			b.Fatal(err)
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	s, err := ctlfile.Read(dir + "/memory.stat")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(s) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "kernel "); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatalf("%s/memory.stat has no kernel line", dir)
	return 0
}

// slab reads the machine's slab memory (/proc/meminfo Slab): the watches'
// marks, and the cgroup inodes they pin, which nothing charges to a
// cgroup. Other processes move it too: an indication only.
func slab(b *testing.B) uint64 {
	b.Helper()
	s, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(s)) {
		if v, ok := strings.CutPrefix(line, "Slab:"); ok {
			n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n << 10
		}
	}
	b.Fatal("/proc/meminfo has no Slab line")
	return 0
}

// heap is the Go heap in use after a collection.
func heap() uint64 {
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return m.HeapAlloc
}

// What NewCgroups costs with 10,000 cgroups beneath the watched one (100
// parents of 100 children): the time to set the watches up, the kernel
// and Go memory per watch, and how soon a new cgroup is reported among
// them. docs/newcgroups.md cites its output.
func BenchmarkNewCgroups10k(b *testing.B) {
	const parents, children = 100, 100
	l := cgrouptest.Layout(b)
	p := cgrouptest.New(b, l, 0)
	var cgs []host.Cgroup
	for i := range parents {
		a := host.Cgroup(path.Join(string(p.Path), "p"+strconv.Itoa(i)))
		cgs = append(cgs, a)
		for j := range children {
			cgs = append(cgs, host.Cgroup(path.Join(string(a), "c"+strconv.Itoa(j))))
		}
	}
	start := time.Now()
	mkdirsB(b, l, cgs)
	b.Logf("created %d cgroups in %v", len(cgs), time.Since(start).Round(time.Millisecond))

	for b.Loop() {
		k0, h0, s0 := kmem(b, l), heap(), slab(b)
		start := time.Now()
		w, err := watch.WatchNewCgroups(l.Memory, p.Path, watch.NewCgroupsOptions{})
		if err != nil {
			b.Fatal(err)
		}
		setup := time.Since(start)
		k1, h1, s1 := kmem(b, l), heap(), slab(b)
		n := w.Watches()
		in := collect(w)
		// New cgroups among the watched ones, one beneath each of 100
		// parents, spaced so that each is timed alone.
		var lat []time.Duration
		for i := range parents {
			cg := host.Cgroup(path.Join(string(p.Path), "p"+strconv.Itoa(i), "new"))
			dir := l.Memory.Dir(cg)
			// Timed from the call: mkdir returns after the report
			// is read, often.
			at := time.Now()
			if err := os.Mkdir(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			select {
			case r := <-in:
				if r.ev.Cgroup != cg {
					b.Fatalf("report %+v, want %s", r.ev, cg)
				}
				lat = append(lat, max(r.at.Sub(at), 0))
			case <-time.After(10 * time.Second):
				b.Fatalf("%s not reported", cg)
			}
			if err := rmdir(dir); err != nil {
				b.Fatal(err)
			}
			<-in // its removal
		}
		w.Close()
		slices.Sort(lat)
		b.ReportMetric(float64(n), "watches")
		b.ReportMetric(float64(setup.Milliseconds()), "setup-ms")
		b.ReportMetric(float64(int64(k1)-int64(k0))/float64(n), "kmem-B/watch")
		b.ReportMetric(float64(int64(h1)-int64(h0))/float64(n), "heap-B/watch")
		b.ReportMetric(float64(int64(s1)-int64(s0))/float64(n), "slab-B/watch")
		b.ReportMetric(float64(stats.Percentile(lat, 50).Microseconds()), "p50-µs")
		b.ReportMetric(float64(stats.Percentile(lat, 99).Microseconds()), "p99-µs")
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
	}
}

// mkdirsB creates the cgroups, parents first, and removes them at cleanup.
func mkdirsB(b *testing.B, l layout.Layout, cgs []host.Cgroup) {
	b.Helper()
	b.Cleanup(func() {
		start := time.Now()
		for i := len(cgs) - 1; i >= 0; i-- {
			if err := rmdir(l.Memory.Dir(cgs[i])); err != nil && !errors.Is(err, os.ErrNotExist) {
				b.Errorf("cleanup: %v", err)
			}
		}
		b.Logf("removed %d cgroups in %v", len(cgs), time.Since(start).Round(time.Millisecond))
	})
	for _, cg := range cgs {
		if err := os.Mkdir(l.Memory.Dir(cg), 0o755); err != nil {
			b.Fatal(err)
		}
	}
}
