package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// The daemon's scheduler slice (--sched-slice). EEVDF, the fair scheduler
// since 6.6, lets a task run out its slice before a task that wakes up
// preempts it (kernel/sched/fair.c, RUN_TO_PARITY), 0.75 ms × (1 + log2
// CPUs) by default: 1.4 ms on the 2-CPU host. The tracker's wake-up then
// waits behind whatever the daemon's other threads (a squeeze's reclaim, a
// write-out) or the writer are doing, while the writer dirties a megabyte
// a millisecond. A task with a shorter slice preempts a longer one on
// wake-up (PREEMPT_SHORT, 6.12) and is protected for less; the slice is
// sched_attr.sched_runtime for SCHED_OTHER (kernel/sched/syscalls.c,
// __setscheduler_params), clamped to 0.1–100 ms, and a thread made by
// clone inherits it, so setting it on every thread at start covers the
// threads the Go runtime makes later.
const (
	// DefaultSchedSlice is short enough to preempt on wake-up (the
	// kernel's default is 1.4 ms on 2 CPUs, 3 ms from 8) and no
	// shorter: at the kernel's least, 100 µs, the daemon's threads also
	// preempt one another and the writer more, and E1 and E2 wrote 6 %
	// and 8 % slower than at 300 µs for about the same p99 of
	// dirty+writeback (6 interleaved runs each of 0, 100 µs and 300 µs;
	// docs/lab/2026-11-30-results.md, "Fourth session").
	DefaultSchedSlice = 300 * time.Microsecond
	minSchedSlice     = 100 * time.Microsecond
	maxSchedSlice     = 100 * time.Millisecond
)

// errNoCustomSlice says the kernel keeps no custom slice for SCHED_OTHER
// (before 6.12, or not EEVDF): it accepts sched_runtime and ignores it.
var errNoCustomSlice = errors.New("this kernel keeps no custom slice for SCHED_OTHER tasks (it needs 6.12 or later)")

// checkSchedSlice validates --sched-slice: 0 (the kernel's default) or
// the range the kernel accepts.
func checkSchedSlice(d time.Duration) error {
	if d == 0 || d >= minSchedSlice && d <= maxSchedSlice {
		return nil
	}
	return fmt.Errorf("--sched-slice: invalid value %s: allowed 0 (the kernel's default) or %s to %s", d, minSchedSlice, maxSchedSlice)
}

// setSchedSlice gives every thread of this process the slice d, keeping
// each thread's policy and nice value, and returns how many it set. It
// lists /proc/self/task until a pass finds no thread it has not set, so a
// thread cloned meanwhile from one not yet set is caught. A thread that
// exits meanwhile is skipped. It returns errNoCustomSlice when the kernel
// does not keep the slice.
func setSchedSlice(d time.Duration) (int, error) {
	done := map[int]bool{}
	for {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return len(done), fmt.Errorf("list threads: %w", err)
		}
		fresh := 0
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			fresh++
			done[tid] = true
			err = setThreadSlice(tid, d)
			switch {
			case errors.Is(err, unix.ESRCH):
			case err != nil:
				return len(done), err
			}
		}
		if fresh == 0 {
			return len(done), nil
		}
	}
}

// setThreadSlice sets thread tid's slice to d, its other scheduling
// attributes (policy, nice, reset-on-fork) as they are, and checks that
// the kernel kept it: sched_getattr reports a SCHED_OTHER task's slice
// where the kernel has one (kernel/sched/syscalls.c, get_params), and 0
// before.
func setThreadSlice(tid int, d time.Duration) error {
	a, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return fmt.Errorf("sched_getattr thread %d: %w", tid, err)
	}
	a.Size = unix.SizeofSchedAttr
	a.Runtime = uint64(d)
	if err := unix.SchedSetAttr(tid, a, 0); err != nil {
		return fmt.Errorf("sched_setattr thread %d, slice %s: %w", tid, d, err)
	}
	got, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return fmt.Errorf("sched_getattr thread %d: %w", tid, err)
	}
	if d > 0 && got.Runtime != uint64(d) {
		return errNoCustomSlice
	}
	return nil
}

// logSchedSlice sets the daemon's slice, as --sched-slice asks, and logs
// the outcome once. A kernel without custom slices, or a refusal, leaves
// the daemon at the kernel's default: the slice shortens its reaction,
// nothing depends on it.
func logSchedSlice(log *slog.Logger, d time.Duration) {
	if d == 0 {
		return
	}
	n, err := setSchedSlice(d)
	switch {
	case errors.Is(err, errNoCustomSlice):
		log.Info("scheduler slice: kept the kernel's default", "reason", err)
	case err != nil:
		log.Warn("scheduler slice: kept the kernel's default", "err", err)
	default:
		log.Info("scheduler slice set", "slice", d, "threads", n)
	}
}
