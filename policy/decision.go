// Package policy is memcgd's three controllers as a pure state machine:
// per cgroup, an observation goes in and a decision comes out (write out
// the cgroup's files, flush everything, reclaim N bytes, pause the cgroup
// for d), with no files, clocks or goroutines. The agent's loop performs
// the decisions on a host.Host: the real kernel or the simulator.
package policy

import (
	"strings"
	"time"
)

// Reason says why a decision was taken; several may hold at once.
type Reason uint8

const (
	// ReasonBackground: dirty pages past dirty_background (seed 004).
	ReasonBackground Reason = 1 << iota
	// ReasonThrottle: dirty and writeback pages past the freerun ceiling
	// (seed 004, balance_dirty_pages).
	ReasonThrottle
	// ReasonWatermark: free below the low watermark, and still below the
	// high one (seed 001).
	ReasonWatermark
	// ReasonReclaimWriteback: reclaim needs the cgroup's dirty pages
	// written (seed 000).
	ReasonReclaimWriteback
)

func (r Reason) String() string {
	var parts []string
	for _, x := range []struct {
		r Reason
		s string
	}{{ReasonBackground, "background"}, {ReasonThrottle, "throttle"}, {ReasonWatermark, "watermark"}, {ReasonReclaimWriteback, "reclaim-writeback"}} {
		if r&x.r != 0 {
			parts = append(parts, x.s)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// Decision is what to do for one cgroup now. The agent does it in the
// order of the fields: write-out or flush first so reclaim finds clean
// pages, then reclaim, then the pause.
type Decision struct {
	// WriteOut starts write-out of the cgroup's own files.
	WriteOut bool
	// Flush starts write-out of everything on the filesystems the cgroup
	// writes to: the stock kernel's behaviour, and seed 000's fallback.
	Flush bool
	// Reclaim is the bytes to reclaim in the background.
	Reclaim uint64
	// Pause is how long to stop the cgroup's tasks.
	Pause time.Duration
	// Why records the reasons.
	Why Reason
}

// Idle reports whether the decision does nothing.
func (d Decision) Idle() bool {
	return !d.WriteOut && !d.Flush && d.Reclaim == 0 && d.Pause == 0
}
