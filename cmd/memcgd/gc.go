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
// one comes when the heap reaches heapTarget, with GOGC kept between
// minGCPercent and 500 (gctuner): up to six times what is live while
// little is, and a quarter more than what is live past heapTarget. A GOGC
// environment variable turns it off.
//
// Why: the daemon's heap is its long-lived state per cgroup and the
// short-lived garbage of its steps. Go's default (GOGC 100: a heap of
// twice what is live, at least 4 MiB) makes a daemon over many idle
// cgroups hold twice their state, and a busy one over a few cgroups, whose
// live heap is small, collect many times a second (docs/deploy.md,
// "Memory", has the figures).
func tuneGC(log *slog.Logger) {
	if v := os.Getenv("GOGC"); v != "" {
		log.Info("GOGC set by the environment", "gogc", v)
		return
	}
	gctuner.SetMinGCPercent(minGCPercent)
	gctuner.Tuning(heapTarget)
}
