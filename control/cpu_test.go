package control

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time this process has used, user and system: on a
// shared, loaded machine a benchmark's wall time per op measures the load
// as much as the code, its CPU time much less so.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
