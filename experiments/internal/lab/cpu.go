package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cpuTime is the CPU time process pid's threads have used, the sum of the
// first field of /proc/PID/task/*/schedstat (nanoseconds on the CPU,
// kernel/sched/stats.c show_schedstat). Unlike the rusage, it is read
// while the process runs, at nanosecond resolution; a thread that exited
// takes its time with it, so it can undercount across a thread's exit
// (rare in a Go daemon, whose runtime keeps its threads).
func cpuTime(pid int) (time.Duration, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("cpu time of %d: %w", pid, err)
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if os.IsNotExist(err) {
			continue // the thread exited meanwhile
		}
		if err != nil {
			return 0, fmt.Errorf("cpu time of %d: %w", pid, err)
		}
		f := strings.Fields(string(b))
		if len(f) < 1 {
			return 0, fmt.Errorf("cpu time of %d: %s/schedstat: empty", pid, t.Name())
		}
		ns, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cpu time of %d: %s/schedstat: %w", pid, t.Name(), err)
		}
		sum += time.Duration(ns)
	}
	return sum, nil
}

// busyMark is a reading of a process's CPU time and the wall clock.
type busyMark struct {
	cpu time.Duration
	at  time.Time
	ok  bool
}

// BusyStart marks the start of the workload whose daemon CPU use EndArm
// reports (DaemonResult.Busy); BusyEnd marks its end. Both do nothing on
// a nil Daemon (the stock arm). A failed reading leaves Busy unmeasured.
func (d *Daemon) BusyStart() {
	if d != nil {
		d.busyFrom = d.mark()
	}
}

// BusyEnd marks the end of the workload; see BusyStart.
func (d *Daemon) BusyEnd() {
	if d != nil {
		d.busyTo = d.mark()
	}
}

func (d *Daemon) mark() busyMark {
	cpu, err := cpuTime(d.cmd.Process.Pid)
	return busyMark{cpu: cpu, at: time.Now(), ok: err == nil}
}

// busy is the daemon's CPU use between BusyStart and BusyEnd (1 is one
// core), −1 when either mark is missing.
func (d *Daemon) busy() float64 {
	if !d.busyFrom.ok || !d.busyTo.ok || !d.busyTo.at.After(d.busyFrom.at) {
		return -1
	}
	return float64(d.busyTo.cpu-d.busyFrom.cpu) / float64(d.busyTo.at.Sub(d.busyFrom.at))
}
