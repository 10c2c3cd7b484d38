// Package state holds the value types the daemon shares with its surfaces:
// a cgroup's Settings (what `memcgd get` shows), its Status (the daemon's
// view, what `memcgd stat` and the metrics show) and the daemon's own
// Counters. It imports no behaviour, so that control and metrics read the
// daemon's data without importing the daemon loop.
package state
