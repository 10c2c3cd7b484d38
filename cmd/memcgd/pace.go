package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The values of --pace.
const (
	paceAuto = "auto"
	paceOn   = "on"
	paceOff  = "off"
)

// PrePacePeriodCap is the longest period of a pace on kernels before the
// task-based CFS throttle (6.18: "sched/fair: defer throttle when task
// exits to user mode"), where a throttled task can be descheduled holding
// a kernel lock (a jbd2 handle in ext4's write path) and others wait out
// the rest of its period: 20 ms bounds that wait.
const PrePacePeriodCap = 20 * time.Millisecond

// pacing decides, for --pace=mode on the kernel release, whether the
// throttle paces, and the longest period of a pace (0: none). From 6.18,
// where the CFS throttle waits for the return to user space, auto paces
// and on does the same. Before, a throttled task can be stopped anywhere
// in the kernel, holding what it holds, so auto keeps the freezer, and on
// paces with the period capped at PrePacePeriodCap. An unknown release
// counts as one before 6.18. note, if not empty, says why auto does not
// pace.
func pacing(mode, release string) (pace bool, periodCap time.Duration, note string) {
	if mode == paceOff {
		return false, 0, ""
	}
	major, minor, err := kernelVersion(release)
	if err == nil && (major > 6 || major == 6 && minor >= 18) {
		return true, 0, ""
	}
	if mode == paceOn {
		return true, PrePacePeriodCap, ""
	}
	if err != nil {
		return false, 0, fmt.Sprintf("kernel version unknown (%v): the freezer throttles; --pace=on paces, with periods of at most %v", err, PrePacePeriodCap)
	}
	return false, 0, fmt.Sprintf("kernel %s is older than 6.18, whose CFS throttle stops a task only on its return to user space: the freezer throttles; --pace=on paces, with periods of at most %v", release, PrePacePeriodCap)
}

// kernelRelease is the running kernel's release (uname -r).
func kernelRelease() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", fmt.Errorf("uname: %w", err)
	}
	return unix.ByteSliceToString(u.Release[:]), nil
}

// kernelVersion parses the major and minor version of a kernel release
// ("6.18.44-fc-v669").
func kernelVersion(release string) (major, minor int, err error) {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return 0, 0, fmt.Errorf("kernel release %q: want MAJOR.MINOR...", release)
	}
	major, err = strconv.Atoi(parts[0])
	if err == nil {
		minor, err = strconv.Atoi(strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	}
	if err != nil {
		return 0, 0, fmt.Errorf("kernel release %q: want MAJOR.MINOR...: %w", release, err)
	}
	return major, minor, nil
}
