package watch

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
)

const schedMiB = 1 << 20

// defaultRule is the schedule with the Watcher's defaults.
var defaultRule = pollRule{min: DefaultMinUsagePoll, max: DefaultUsagePoll, rate: DefaultUsageRate}

func TestPollInterval(t *testing.T) {
	tests := []struct {
		name     string
		distance uint64
		rate     float64 // seen growth, bytes/s
		want     time.Duration
	}{
		{"far below and not growing: read every UsagePoll", 1 << 30, 0, DefaultUsagePoll},
		{"16 MiB below, not growing: as long as UsageRate takes to cover it", 16 * schedMiB, 0, 4 * time.Second},
		{"16 MiB below, seen growing 32 MiB/s: half a second", 16 * schedMiB, 32 * schedMiB, 500 * time.Millisecond},
		{"seen growing more slowly than UsageRate: UsageRate counts", 16 * schedMiB, 1 * schedMiB, 4 * time.Second},
		{"at the threshold: MinUsagePoll", 0, 0, DefaultMinUsagePoll},
		{"near it and growing fast: MinUsagePoll, the floor", 1 * schedMiB, 1 << 30, DefaultMinUsagePoll},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := defaultRule.interval(tt.distance, tt.rate); got != tt.want {
				t.Errorf("interval(%d MiB, %.0f MiB/s) = %v, want %v", tt.distance/schedMiB, tt.rate/schedMiB, got, tt.want)
			}
		})
	}
}

func TestDueAfterIsNeverLaterThanTheInterval(t *testing.T) {
	tests := []struct {
		now, interval, want time.Duration
	}{
		{1234567 * time.Microsecond, 30 * time.Second, 31 * time.Second},              // rounded down to a second
		{1234567 * time.Microsecond, 4 * time.Second, 5200 * time.Millisecond},        // to 100 ms
		{1234567 * time.Microsecond, 100 * time.Millisecond, 1330 * time.Millisecond}, // to 10 ms
		{1234567 * time.Microsecond, 5 * time.Millisecond, 1239 * time.Millisecond},   // to 1 ms
	}
	for _, tt := range tests {
		got := dueAfter(tt.now, tt.interval)
		if got != tt.want {
			t.Errorf("dueAfter(%v, %v) = %v, want %v", tt.now, tt.interval, got, tt.want)
		}
		if got > tt.now+tt.interval || got <= tt.now {
			t.Errorf("dueAfter(%v, %v) = %v: outside (now, now+interval]", tt.now, tt.interval, got)
		}
	}
}

// simulate reads a cgroup whose usage follows usage(t) on the schedule,
// from 0 to end of fake time, and returns when the first read found it at
// or above threshold and the intervals it used.
func simulate(r pollRule, threshold uint64, usage func(time.Duration) uint64, end time.Duration) (found time.Duration, ok bool, reads int) {
	p := usagePoll{index: -1}
	now := time.Duration(0)
	for now <= end {
		u := usage(now)
		reads++
		if u >= threshold {
			return now, true, reads
		}
		now = r.next(&p, now, u, threshold)
	}
	return 0, false, reads
}

// crossing returns when usage(t) first reaches threshold, to 1 ms.
func crossing(threshold uint64, usage func(time.Duration) uint64, end time.Duration) time.Duration {
	for t := time.Duration(0); t <= end; t += time.Millisecond {
		if usage(t) >= threshold {
			return t
		}
	}
	return -1
}

// The schedule's promise (watch_schedule.go): growth no faster than
// max(UsageRate, the rate its reads saw) is reported at most MinUsagePoll
// after the crossing; any crossing at most one interval, so UsagePoll,
// after the last read before it.
func TestPollScheduleReportsWithinItsBound(t *testing.T) {
	ramp := func(start time.Duration, base uint64, rate float64) func(time.Duration) uint64 {
		return func(t time.Duration) uint64 {
			if t < start {
				return base
			}
			return base + uint64(rate*(t-start).Seconds())
		}
	}
	tests := []struct {
		name      string
		threshold uint64
		usage     func(time.Duration) uint64
		maxDelay  time.Duration // after the crossing
	}{
		{"growth at UsageRate from the start: within MinUsagePoll",
			64 * schedMiB, ramp(0, 0, DefaultUsageRate), DefaultMinUsagePoll},
		{"growth at half UsageRate: within MinUsagePoll",
			256 * schedMiB, ramp(0, 100*schedMiB, DefaultUsageRate/2), DefaultMinUsagePoll},
		{"growth at twice UsageRate, seen by earlier reads: within MinUsagePoll",
			1 << 30, ramp(0, 0, 2*DefaultUsageRate), DefaultMinUsagePoll},
		{"idle 424 MiB below for 3 min, then 40 MiB/s: at most UsagePoll",
			1 << 30, ramp(3*time.Minute, 600*schedMiB, 40*schedMiB), DefaultUsagePoll},
		{"idle, then a burst of 1 GiB/s: within one interval of the last read, at most UsagePoll",
			64 * schedMiB, ramp(47*time.Second, 0, 1<<30), DefaultUsagePoll},
		{"idle far below, then a burst: at most UsagePoll",
			1 << 30, ramp(95*time.Second, 0, 4<<30), DefaultUsagePoll},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const end = 10 * time.Minute
			cross := crossing(tt.threshold, tt.usage, end)
			if cross < 0 {
				t.Fatal("the usage never crosses: a broken case")
			}
			found, ok, reads := simulate(defaultRule, tt.threshold, tt.usage, end)
			if !ok {
				t.Fatalf("crossing at %v never found", cross)
			}
			delay := found - cross
			if delay > tt.maxDelay {
				t.Errorf("crossed at %v, found at %v: %v late, want at most %v", cross, found, delay, tt.maxDelay)
			}
			t.Logf("crossed at %v, found %v later, after %d reads", cross, delay, reads)
		})
	}
}

// A cgroup seen growing fast is not left at MinUsagePoll for ever once it
// stops: the estimate falls over rateWindow and the interval grows back.
func TestPollScheduleRelaxesAfterGrowthStops(t *testing.T) {
	p := usagePoll{index: -1}
	const threshold = 1 << 30
	// 100 MiB/s for 5 s, to 500 MiB, read at 0 and 1 s (say, as the
	// agent armed the watch again), then on the schedule.
	usage := func(t time.Duration) uint64 { return uint64(100 * schedMiB * min(t, 5*time.Second).Seconds()) }
	defaultRule.next(&p, 0, 0, threshold)
	now := defaultRule.next(&p, time.Second, usage(time.Second), threshold)
	u := usage(now)
	for now < 5*time.Second {
		u = usage(now)
		now = defaultRule.next(&p, now, u, threshold)
	}
	busy := defaultRule.interval(threshold-u, p.rate)
	u = usage(now)
	for range 200 {
		now = defaultRule.next(&p, now, u, threshold) // no growth
	}
	idle := defaultRule.interval(threshold-u, p.rate)
	// 524 MiB at 100 MiB/s: 5.24 s; at UsageRate it would be 131 s.
	if want := time.Duration(float64(threshold-u) / (100 * schedMiB) * float64(time.Second)); busy > want+time.Millisecond || idle != DefaultUsagePoll {
		t.Errorf("interval %v while growing 100 MiB/s %d MiB below, %v after it stopped; want %v, then %v",
			busy, (threshold-u)/schedMiB, idle, want, DefaultUsagePoll)
	}
}

// The cost the schedule is for: 10,000 idle cgroups, each far from its
// threshold, are read once per UsagePoll, in few wake-ups of the loop.
func TestPollScheduleOfIdleCgroups(t *testing.T) {
	const n = 10000
	var s usageSchedule
	wts := make([]*watched, n)
	for i := range wts {
		wts[i] = &watched{poll: usagePoll{index: -1}}
		// Armed over 10 s, as the agent's first scan would.
		now := time.Duration(i) * time.Millisecond
		s.set(wts[i], defaultRule.next(&wts[i].poll, now, 10*schedMiB, 1<<30))
	}
	reads, wakeups := 0, 0
	const from, to = time.Minute, 6 * time.Minute
	now := time.Duration(0)
	for {
		due, ok := s.next()
		if !ok {
			t.Fatal("the schedule emptied")
		}
		if due > to {
			break
		}
		now = due
		if now >= from {
			wakeups++
		}
		for wt := s.popDue(now); wt != nil; wt = s.popDue(now) {
			if now >= from {
				reads++
			}
			s.set(wt, defaultRule.next(&wt.poll, now, 10*schedMiB, 1<<30))
		}
	}
	secs := (to - from).Seconds()
	perSec, wakePerSec := float64(reads)/secs, float64(wakeups)/secs
	if want := n / DefaultUsagePoll.Seconds(); perSec > want*1.05 {
		t.Errorf("%.0f reads/s, want about %.0f (every cgroup once per %v)", perSec, want, DefaultUsagePoll)
	}
	if wakePerSec > 1.05 {
		t.Errorf("%.2f wake-ups/s, want at most 1: due times round to whole seconds", wakePerSec)
	}
	t.Logf("%d idle cgroups: %.0f reads/s in %.2f wake-ups/s", n, perSec, wakePerSec)
}

// The heap gives the watches in due order under any sequence of set and
// remove, against a sorted list.
func TestUsageScheduleOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var s usageSchedule
	wts := make([]*watched, 50)
	for i := range wts {
		wts[i] = &watched{poll: usagePoll{index: -1}}
	}
	in := map[*watched]time.Duration{}
	for range 2000 {
		wt := wts[rng.IntN(len(wts))]
		if rng.IntN(3) == 0 {
			s.remove(wt)
			delete(in, wt)
		} else {
			d := time.Duration(rng.IntN(1000))
			s.set(wt, d)
			in[wt] = d
		}
		if s.Len() != len(in) {
			t.Fatalf("%d scheduled, want %d", s.Len(), len(in))
		}
	}
	var want []time.Duration
	for _, d := range in {
		want = append(want, d)
	}
	slices.Sort(want)
	var got []time.Duration
	for wt := s.popDue(time.Hour); wt != nil; wt = s.popDue(time.Hour) {
		if wt.poll.index != -1 {
			t.Errorf("a popped watch keeps index %d", wt.poll.index)
		}
		got = append(got, wt.poll.due)
	}
	if !slices.Equal(got, want) {
		t.Errorf("popped %v, want %v", got, want)
	}
}

// BenchmarkUsagePoll measures one read of the v2 usage poll as the loop
// makes it, schedule included: take the first due watch, pread its usage
// file, parse, fold into its growth estimate, schedule its next read. The
// files are this process's own memory cgroup's usage file (memory.current
// on v2, memory.usage_in_bytes on v1: the same kernel path, a cftype
// read_u64 of page_counter_read), opened once per watch, 10,000 watches.
//
//	go test ./cgroupfs -run '^$' -bench BenchmarkUsagePoll -benchmem
func BenchmarkUsagePoll(b *testing.B) {
	file := ""
	for _, f := range []string{"/sys/fs/cgroup/memory", "/sys/fs/cgroup"} {
		for _, name := range []string{"memory.usage_in_bytes", "memory.current"} {
			cg, err := os.ReadFile("/proc/self/cgroup")
			if err != nil {
				b.Fatal(err)
			}
			for _, line := range strings.Split(strings.TrimSpace(string(cg)), "\n") {
				parts := strings.SplitN(line, ":", 3)
				if len(parts) == 3 && (parts[1] == "memory" || parts[0] == "0") {
					p := filepath.Join(f, parts[2], name)
					if _, err := os.Stat(p); err == nil && file == "" {
						file = p
					}
				}
			}
		}
	}
	if file == "" {
		b.Skip("no memory cgroup usage file for this process")
	}
	w, err := NewWatcher(layout.Layout{}, WatcherOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	const n = 10000
	for i := range n {
		fd, err := unix.Open(file, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer unix.Close(fd)
		wt := &watched{current: fd, wake: host.Wake{UsageAbove: 1 << 50}, poll: usagePoll{index: -1}}
		w.schedule.set(wt, time.Duration(i))
	}
	b.ReportAllocs()
	now := time.Duration(0)
	for b.Loop() {
		now += time.Microsecond
		w.pollUsage(w.schedule.popDue(1<<62), now)
	}
}
