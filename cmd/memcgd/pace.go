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
	paceOff  = "off"
)

// PrePacePeriodCap is the longest period of a pace on kernels before the
// task-based CFS throttle (6.18: "sched/fair: defer throttle when task
// exits to user mode"), where a throttled task can be descheduled holding
// a kernel lock (a jbd2 handle in ext4's write path) and others wait out
// the rest of its period: 20 ms bounds that wait.
const PrePacePeriodCap = 20 * time.Millisecond

// pacePeriodCap is the longest period of a pace on the running kernel:
// none (0, a second) from 6.18 on, PrePacePeriodCap before.
func pacePeriodCap() (time.Duration, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return 0, fmt.Errorf("uname: %w", err)
	}
	release := unix.ByteSliceToString(u.Release[:])
	major, minor, err := kernelVersion(release)
	if err != nil {
		return PrePacePeriodCap, err
	}
	if major > 6 || major == 6 && minor >= 18 {
		return 0, nil
	}
	return PrePacePeriodCap, nil
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
