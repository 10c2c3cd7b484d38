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
// Why: a write-out blocks in the kernel when the device's queue is full
// (sync_file_range waits for a request tag), and a v1 squeeze blocks in
// reclaim, for milliseconds; the agent runs them on goroutines of their
// own, one per cgroup at work (agent.go, actOrHandOff). A goroutine in a
// system call keeps its P until the runtime's sysmon takes it back
// (runtime/proc.go, retake), and sysmon, after a quiet spell, sleeps up
// to 10 ms between looks. With as many Ps as the test host's 2 CPUs, two
// write-outs blocked at once left no P for the goroutine that reads the
// tracker's ring buffer: wake-ups came out of the ring 6 to 8.5 ms late,
// all at once, while two write-outs took 25 ms (the unpaced writer test's
// trace, docs/lab/2026-11-30-closedloop.md). With as many Ps in reserve as the workers
// that step cgroups, as many write-outs can block while the steps and the
// ring's reader still find a P; the CPUs are shared by the kernel's
// scheduler as before.
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
