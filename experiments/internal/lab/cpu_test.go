package lab

import (
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// cpuTime reads the real /proc: this process's CPU time grows by at
// least what a busy loop spends on the CPU, and not by more than the
// wall time times the threads that could run.
func TestCPUTimeCountsThisProcessBusyLoop(t *testing.T) {
	before, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	x := 0
	for time.Since(start) < 50*time.Millisecond {
		x++
	}
	after, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(start)
	// A loaded machine may give the loop only part of the wall time.
	if got := after - before; got < 5*time.Millisecond || got > 8*wall {
		t.Errorf("cpu time grew by %v over a %v busy loop (%d turns), want between 5 ms and 8 × the wall time", got, wall, x)
	}
	if _, err := cpuTime(-1); err == nil {
		t.Error("cpuTime(-1): no error, want one naming the pid")
	}
}

func TestParseSchedStat(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    SchedStat
		errPart string
	}{
		{in: "83463448 145092599 300\n", want: SchedStat{Run: 83463448, Wait: 145092599, Slices: 300}},
		{in: "0 0 0", want: SchedStat{}},
		{in: "1 2", errPart: "2 fields, want 3"},
		{in: "1 x 3", errPart: `field 2 "x"`},
	} {
		got, err := parseSchedStat(tc.in)
		if tc.errPart != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errPart) {
				t.Errorf("parseSchedStat(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.errPart)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseSchedStat(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestSchedStatSub(t *testing.T) {
	a := SchedStat{Run: 10 * time.Millisecond, Wait: 3 * time.Millisecond, Slices: 7}
	b := SchedStat{Run: 25 * time.Millisecond, Wait: 4 * time.Millisecond, Slices: 9}
	if got, want := b.Sub(a), (SchedStat{Run: 15 * time.Millisecond, Wait: time.Millisecond, Slices: 2}); got != want {
		t.Errorf("Sub = %+v, want %+v", got, want)
	}
}

// The calling thread's own schedstat: a busy loop shows in its time on the
// CPU, and a sleep in a new timeslice. The kernel counts a timeslice when the
// task is switched in (kernel/sched/stats.h, sched_info_arrive); on an idle
// CPU a busy loop alone may never be switched out, so the thread sleeps once.
func TestReadSchedStatOfThisThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := ReadSchedStat("/proc/thread-self/schedstat")
	if err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); time.Since(start) < 20*time.Millisecond; {
	}
	// The goroutine is locked to its thread, so the thread itself blocks.
	time.Sleep(time.Millisecond)
	after, err := ReadSchedStat("/proc/thread-self/schedstat")
	if err != nil {
		t.Fatal(err)
	}
	if d := after.Sub(before); d.Run < 2*time.Millisecond || d.Slices < 1 {
		t.Errorf("a 20 ms busy loop: %+v, want at least 2 ms on the CPU and a timeslice after a sleep", d)
	}
}

func TestParseByCall(t *testing.T) {
	text := `# HELP memcgd_host_call_cpu_seconds_total CPU time.
# TYPE memcgd_host_call_cpu_seconds_total counter
memcgd_host_call_cpu_seconds_total{call="observe"} 0.25
memcgd_host_call_cpu_seconds_total{call="write out"} 1.5
memcgd_host_call_cpu_seconds_total{call="reclaim"} bad
memcgd_host_calls_total{call="observe"} 3400
memcgd_cgroup_dirty_bytes{cgroup="/a"} 7
`
	got := parseByCall(text, "memcgd_host_call_cpu_seconds_total")
	want := map[string]float64{"observe": 0.25, "write out": 1.5}
	if len(got) != len(want) || got["observe"] != 0.25 || got["write out"] != 1.5 {
		t.Errorf("parseByCall = %v, want %v (an unparsable value and other families left out)", got, want)
	}
	if got := parseByCall(text, "memcgd_host_calls_total"); len(got) != 1 || got["observe"] != 3400 {
		t.Errorf("parseByCall of the counts = %v, want observe 3400 alone", got)
	}
}

func TestParseUnlabelled(t *testing.T) {
	text := `# HELP go_gc_duration_seconds A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0.5"} 0.0001
go_gc_duration_seconds_sum 0.02
go_gc_duration_seconds_count 42
go_memstats_alloc_bytes 3.5e+06
go_memstats_alloc_bytes_total 1.2345e+08
go_memstats_alloc_bytes_total_other 9
`
	got := parseUnlabelled(text, runtimeFamilies)
	if len(got) != 2 || got["go_gc_duration_seconds_count"] != 42 || got["go_memstats_alloc_bytes_total"] != 1.2345e8 {
		t.Errorf("parseUnlabelled = %v, want the GC count 42 and 1.2345e8 bytes allocated, nothing else", got)
	}
}

// callRates takes each call's count and CPU time over the interval: a call
// made before it and not since is left out.
func TestCallRates(t *testing.T) {
	at := time.Unix(1000, 0)
	from := busyMark{at: at,
		counts: map[string]float64{"observe": 100, "write out": 10, "list": 1},
		calls:  map[string]float64{"observe": 0.01, "write out": 0.005, "list": 0.001}}
	to := busyMark{at: at.Add(2 * time.Second),
		counts: map[string]float64{"observe": 2100, "write out": 410, "list": 1, "set pace": 410},
		calls:  map[string]float64{"observe": 0.21, "write out": 0.245, "list": 0.001, "set pace": 0.0205}}
	want := map[string]CallRate{
		"observe":   {PerSecond: 1000, CPUEach: 100 * time.Microsecond},
		"set pace":  {PerSecond: 205, CPUEach: 50 * time.Microsecond},
		"write out": {PerSecond: 200, CPUEach: 600 * time.Microsecond},
	}
	got := callRates(from, to)
	if len(got) != len(want) {
		t.Fatalf("callRates = %+v, want %+v", got, want)
	}
	for call, w := range want {
		g, ok := got[call]
		if !ok || math.Abs(g.PerSecond-w.PerSecond) > 1e-9 || (g.CPUEach-w.CPUEach).Abs() > time.Microsecond/100 {
			t.Errorf("callRates[%q] = %+v (%v), want %+v", call, g, ok, w)
		}
	}
	if got := callRates(busyMark{at: at}, to); got != nil {
		t.Errorf("callRates without a first scrape = %+v, want nil (not measured)", got)
	}
	r := DaemonResult{Calls: got, Steps: 1000, BusyWall: 2 * time.Second, Sched: SchedStat{Slices: 16000}}
	for _, tc := range []struct{ call, want string }{
		{"observe", "1000/s, 100 µs"},
		{"write out", "200/s, 600 µs"},
		{"reclaim", "0/s"},
	} {
		if got := r.CallText(tc.call); got != tc.want {
			t.Errorf("CallText(%q) = %q, want %q", tc.call, got, tc.want)
		}
	}
	if got := r.RunsPerStep(); got != 8 {
		t.Errorf("RunsPerStep = %v, want 8 (16,000 runs in 2 s at 1,000 steps a second)", got)
	}
	unread := DaemonResult{Steps: -1}
	if got := unread.CallText("observe"); got != "n/a" {
		t.Errorf("CallText unmeasured = %q, want n/a", got)
	}
	if got := unread.RunsPerStep(); !math.IsNaN(got) {
		t.Errorf("RunsPerStep unmeasured = %v, want NaN", got)
	}
}
