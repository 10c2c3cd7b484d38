package agent

import "time"

// timerEntry is an active cgroup waiting for its next step.
type timerEntry struct {
	at  time.Time
	st  *cgroupState
	seq uint64 // st.timerSeq when pushed: the entry is stale once they differ
}

// timerHeap orders waiting cgroups by when they are due (container/heap).
type timerHeap []timerEntry

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timerEntry)) }
func (h *timerHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
