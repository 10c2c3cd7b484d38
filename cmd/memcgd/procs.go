package main

import (
	"log/slog"
	"os"
	"runtime"
)

// raiseProcs gives the Go runtime one P (GOMAXPROCS) per worker beyond
// its default, one per CPU, unless the GOMAXPROCS environment variable
// sets it.
//
// Why: a worker's write-out blocks in the kernel when the device's queue
// is full (sync_file_range waits for a request tag), and a squeeze blocks
// in reclaim, for milliseconds; a goroutine in a system call keeps its P
// until the runtime's sysmon takes it back (runtime/proc.go, retake), and
// sysmon, after a quiet spell, sleeps up to 10 ms between looks. With as
// many Ps as the 2 CPUs of the test host, two workers blocked at once left
// no P for the goroutine that reads the tracker's ring buffer: wake-ups
// came out of the ring 6 to 8.5 ms late, all at once, while two write-outs
// took 25 ms (the unpaced writer test's trace, docs/closedloop.md). With a
// P per worker in reserve, a blocked worker never holds a P the reaction
// path needs; the CPUs are shared by the kernel's scheduler as before.
func raiseProcs(log *slog.Logger, workers int) {
	if workers <= 0 {
		return // agent.New refuses it
	}
	if v := os.Getenv("GOMAXPROCS"); v != "" {
		log.Info("GOMAXPROCS set by the environment", "procs", runtime.GOMAXPROCS(0))
		return
	}
	n := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(n + workers)
	log.Debug("GOMAXPROCS raised by one per worker", "from", n, "to", n+workers)
}
