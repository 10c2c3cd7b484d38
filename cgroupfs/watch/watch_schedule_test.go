package watch_test

import (
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/cgroupfs/watch"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// pacedScript writes $1 files $0.0, $0.1, … of $2 4 KiB blocks each, one
// every $3 seconds, then sleeps: a cgroup growing at a steady rate.
const pacedScript = `i=0; while [ $i -lt "$1" ]; do dd if=/dev/zero of="$0.$i" bs=4096 count="$2" 2>/dev/null || exit 1; i=$((i+1)); sleep "$3"; done; exec sleep 3600`

// TestWatchReportsUsageWithinTheScheduledBound checks the v2 usage poll's
// promise (cgroupfs/watch_schedule.go) with the default options, on the
// real kernel: a cgroup idle below its threshold and then filled at once
// is reported at most one interval (UsagePollInterval of its distance)
// after the Watch that read it last; a cgroup growing at no more than
// UsageRate is reported about MinUsagePoll after it crosses. On v1 the
// kernel's own threshold reports both at once.
func TestWatchReportsUsageWithinTheScheduledBound(t *testing.T) {
	l := cgrouptest.Layout(t)
	// A loaded machine (or the VM's emulated CPUs) delays the loop and
	// the receiver; the bounds below add this, four times over under
	// qemu's emulation (vmSlack).
	slack := cgrouptest.VMSlack()
	opts := watch.WatcherOptions{}

	t.Run("no threshold: never read", func(t *testing.T) {
		if l.Memory.Version == layout.V1 {
			t.Skip("v1 arms a kernel threshold and reads no usage on a schedule")
		}
		c := cgrouptest.New(t, l, 256*watchMiB)
		// Every 100 ms at most, so that a read would show within the wait.
		w := newWatcher(t, l, watch.WatcherOptions{UsagePoll: 100 * time.Millisecond})
		if err := w.Watch(c.Path, host.Wake{UsageAbove: memcg.NoLimit}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		if n := w.UsageReads(); n != 0 {
			t.Fatalf("UsageAbove NoLimit: %d reads of memory.current, want 0", n)
		}
		// A threshold is read at arming and then on its schedule; taking
		// it away stops the reads.
		if err := w.Watch(c.Path, host.Wake{UsageAbove: watchUsage(t, l, c.Dir) + 64*watchMiB}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		if err := w.Watch(c.Path, host.Wake{UsageAbove: memcg.NoLimit}); err != nil {
			t.Fatal(err)
		}
		armed := w.UsageReads()
		time.Sleep(500 * time.Millisecond)
		if n := w.UsageReads(); armed < 3 || n != armed {
			t.Errorf("%d reads while a threshold was armed for 500 ms (want at least 3), %d more after it was taken away (want 0)",
				armed, n-armed)
		}
	})

	t.Run("idle, then filled at once: within one interval of the last read", func(t *testing.T) {
		c := cgrouptest.New(t, l, 256*watchMiB)
		w := newWatcher(t, l, opts)
		const distance = 16 * watchMiB
		interval, err := opts.UsagePollInterval(distance)
		if err != nil {
			t.Fatal(err)
		}
		usage := watchUsage(t, l, c.Dir)
		armed := time.Now()
		if err := w.Watch(c.Path, host.Wake{UsageAbove: usage + distance}); err != nil {
			t.Fatal(err)
		}
		// Idle for a while, and so not reported.
		if awaitReport(w, c.Path, interval/3) {
			t.Fatalf("reported while idle %d MiB below the threshold", distance/watchMiB)
		}
		filled := time.Now()
		cgrouptest.DirtyFile(t, c, filepath.Join(cgrouptest.DiskDir(t), "data"), 2*distance)
		at, ok := awaitReportAt(w, c.Path, time.Until(armed.Add(interval+slack)))
		if !ok {
			t.Fatalf("usage %d MiB -> %d MiB past the threshold %d MiB: not reported within %v of the Watch (interval %v + %v)",
				usage/watchMiB, watchUsage(t, l, c.Dir)/watchMiB, (usage+distance)/watchMiB, interval+slack, interval, slack)
		}
		t.Logf("interval %v: reported %v after the Watch, %v after the write began",
			interval, at.Sub(armed).Round(time.Millisecond), at.Sub(filled).Round(time.Millisecond))
	})

	t.Run("growing at half UsageRate: about MinUsagePoll after the crossing", func(t *testing.T) {
		c := cgrouptest.New(t, l, 256*watchMiB)
		w := newWatcher(t, l, opts)
		const distance = 6 * watchMiB
		usage := watchUsage(t, l, c.Dir)
		threshold := usage + distance
		armed := time.Now()
		if err := w.Watch(c.Path, host.Wake{UsageAbove: threshold}); err != nil {
			t.Fatal(err)
		}
		reported := make(chan time.Time, 1)
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			at, ok := awaitReportAt(w, c.Path, time.Minute)
			if ok {
				reported <- at
			}
		}()
		// 512 KiB every 250 ms: 2 MiB/s, half DefaultUsageRate.
		c.Start(t, "sh", "-c", pacedScript, filepath.Join(cgrouptest.DiskDir(t), "paced"),
			strconv.Itoa(int(3*distance/(512<<10))), "128", "0.25")
		var crossed time.Time
		deadline := time.Now().Add(time.Minute)
		for crossed.IsZero() && time.Now().Before(deadline) {
			if watchUsage(t, l, c.Dir) >= threshold {
				crossed = time.Now()
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if crossed.IsZero() {
			t.Fatalf("the paced writer did not bring usage to %d MiB within a minute", threshold/watchMiB)
		}
		// Half a second for a loaded machine: a fixed poll of 2 s, as
		// before the schedule, misses this bound two times in three.
		bound := watch.DefaultMinUsagePoll + slack/2
		if l.Memory.Version == layout.V1 {
			// The kernel checks a v1 threshold every 128 page events per
			// CPU (memcg1_check_events): up to 512 KiB a CPU late, a
			// quarter second each at 2 MiB/s.
			bound = slack/2 + time.Duration(goruntime.NumCPU())*250*time.Millisecond
		}
		select {
		case at := <-reported:
			t.Logf("crossed %v after the Watch (the test's 5 ms reads), reported %v after the crossing",
				crossed.Sub(armed).Round(time.Millisecond), at.Sub(crossed).Round(time.Millisecond))
		case <-time.After(time.Until(crossed.Add(bound))):
			t.Fatalf("usage crossed %d MiB at a steady 2 MiB/s: not reported within %v", threshold/watchMiB, bound)
		}
	})
}
