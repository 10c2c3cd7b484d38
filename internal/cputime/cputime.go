// Package cputime reads the CPU time the calling process has used, for
// benchmarks that report it beside wall time: on a shared, loaded machine
// a benchmark's wall time per op measures the load as much as the code,
// its CPU time much less so.
package cputime

import (
	"fmt"
	"syscall"
	"time"
)

// Self returns the user plus system CPU time of the calling process.
func Self() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
