package kernel

// The event core: a 4-ary min-heap of value events ordered by (time, seq).
// Events are plain structs (no interface boxing, no closures), so pushing
// and popping allocate nothing once the heap has grown; seq breaks ties in
// the order events were scheduled, which makes every run deterministic.

// Time is simulated time in nanoseconds since the start of the run.
type Time int64

// Units of Time.
const (
	Nanosecond  Time = 1
	Microsecond      = 1000 * Nanosecond
	Millisecond      = 1000 * Microsecond
	Second           = 1000 * Millisecond
)

// Seconds returns t in seconds.
func (t Time) Seconds() float64 { return float64(t) / float64(Second) }

// eventKind says which handler an event goes to.
type eventKind uint8

const (
	evTask            eventKind = iota // a task runs (id: task)
	evIODone                           // a disk completes its oldest request (id: disk)
	evFlusher                          // a wb's flusher runs (id: wb)
	evKupdate                          // a wb's periodic writeback timer fires (id: wb)
	evKswapd                           // the node's kswapd runs
	evMemcgKswapd                      // a memcg's background reclaim thread runs (seed 001; id: memcg)
	evThrottleTimeout                  // a task's reclaim_throttle timeout (id: task)
	evSample                           // the statistics sampler
	evHook                             // an external driver's tick (the memcgd variant)
	evTimer                            // an external driver's one-shot timer (id: timer)
	evCFSPeriod                        // a cpu group's period timer (id: cpu group)
)

type event struct {
	at   Time
	seq  uint64
	kind eventKind
	id   int32
	gen  uint32 // generation of the target when scheduled; stale events are dropped
}

func (a *event) before(b *event) bool {
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

// eventHeap is a 4-ary heap: shallower than a binary heap, so fewer cache
// misses per sift for the same comparisons.
type eventHeap struct {
	ev  []event
	seq uint64
}

func (h *eventHeap) len() int { return len(h.ev) }

func (h *eventHeap) push(at Time, kind eventKind, id int32, gen uint32) {
	h.seq++
	e := event{at: at, seq: h.seq, kind: kind, id: id, gen: gen}
	h.ev = append(h.ev, e)
	i := len(h.ev) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !h.ev[i].before(&h.ev[p]) {
			break
		}
		h.ev[i], h.ev[p] = h.ev[p], h.ev[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	top := h.ev[0]
	n := len(h.ev) - 1
	h.ev[0] = h.ev[n]
	h.ev = h.ev[:n]
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for j := c + 1; j < c+4 && j < n; j++ {
			if h.ev[j].before(&h.ev[m]) {
				m = j
			}
		}
		if !h.ev[m].before(&h.ev[i]) {
			break
		}
		h.ev[i], h.ev[m] = h.ev[m], h.ev[i]
		i = m
	}
	return top
}
