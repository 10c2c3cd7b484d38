package main

import (
	"log/slog"
	"os"

	"github.com/bytedance/gopkg/util/gctuner"
)

// heapTarget is the heap the Go collector lets the daemon grow to before
// it collects, while what is live is small; minGCPercent the least GOGC,
// once what is live passes it.
const (
	heapTarget   = 32 << 20
	minGCPercent = 25
)

// tuneGC sets the collector's GOGC after each collection so that the next
// one comes when the heap reaches heapTarget, with GOGC kept between 50
// and 500 (gctuner), unless the GOGC environment variable sets it.
//
// Why: the daemon's heap is its long-lived state per cgroup (about 2.6
// KiB each: 26 MiB live over 10,000 idle cgroups) and the garbage of its
// steps (about 20 MiB a second with one cgroup written at full speed).
// With Go's default (GOGC 100, a heap of twice what is live, at least 4
// MiB) a busy daemon over few cgroups collects 10 to 20 times a second,
// and one over 10,000 idle cgroups holds twice their state. With this, the
// busy daemon collects a few times less often and the idle one holds half
// as much again as is live.
func tuneGC(log *slog.Logger) {
	if v := os.Getenv("GOGC"); v != "" {
		log.Info("GOGC set by the environment", "gogc", v)
		return
	}
	gctuner.SetMinGCPercent(minGCPercent)
	gctuner.Tuning(heapTarget)
}
