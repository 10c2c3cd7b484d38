package sched

import (
	"container/heap"
	"time"
)

// timerKind is what a timer entry is for.
type timerKind uint8

const (
	// timerLook steps the cgroup: its decision's NextLook.
	timerLook timerKind = iota
	// timerHold thaws a frozen cgroup: the decision's HoldFor, or
	// MaxPause after a refreeze of the Core's own.
	timerHold
	// timerRun refreezes a thawed cgroup within its episode: RunFor.
	timerRun
	// timerBorn steps a new cgroup again (policy.BornRelooks).
	timerBorn
	// timerScan lists the subtree; timerAudit also steps every cgroup.
	timerScan
	timerAudit
)

// timer is one entry of the heap. An entry is stale once its cgroup's
// generation for the kind moved on (cgroup.lookGen, throttle.gen): it is
// skipped when it comes due.
type timer struct {
	at   time.Time
	seq  uint64 // insertion order: entries due at once fire in it
	kind timerKind
	cg   *cgroup // nil for scan and audit
	gen  uint64
	// runAfter, for timerHold: the RunFor that follows the thaw.
	runAfter time.Duration
}

// timers orders the entries by time, then insertion (container/heap).
type timers []timer

func (h timers) Len() int { return len(h) }
func (h timers) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h timers) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timers) Push(x any)   { *h = append(*h, x.(timer)) }
func (h *timers) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// at adds an entry; Core.timerSeq orders it among those due at once.
func (c *Core) at(t timer) {
	c.timerSeq++
	t.seq = c.timerSeq
	heap.Push(&c.timers, t)
}

// live reports whether t still stands.
func (t timer) live() bool {
	switch t.kind {
	case timerLook:
		return !t.cg.gone && t.gen == t.cg.lookGen
	case timerHold, timerRun:
		return !t.cg.gone && t.cg.thr != nil && t.gen == t.cg.thr.gen
	case timerBorn:
		return !t.cg.gone
	}
	return true
}

// due pops and returns the live entries due at or before now, in order.
func (c *Core) due(now time.Time) []timer {
	var out []timer
	for c.timers.Len() > 0 && !c.timers[0].at.After(now) {
		t := heap.Pop(&c.timers).(timer)
		if t.live() {
			out = append(out, t)
		}
	}
	return out
}

// deadline is when the first live entry is due; zero when none is.
func (c *Core) deadline() time.Time {
	for c.timers.Len() > 0 {
		if t := c.timers[0]; t.live() {
			return t.at
		}
		heap.Pop(&c.timers)
	}
	return time.Time{}
}
