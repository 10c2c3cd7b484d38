package lab

import (
	"os"
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
