package agent

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/memcgd/memcgd/host"
)

// inflight records the host calls in progress, so that a Run that stops
// without waiting for them can say which are stuck and where.
type inflight struct {
	mu    sync.Mutex // guards next and calls; a leaf: nothing else is locked under it
	next  uint64
	calls map[uint64]call
	// slow, if set, is told of every call that took SlowCall or longer,
	// after it returns: read-only after New.
	slow func(c call, took time.Duration)
}

// SlowCall is how long a host call may take before the agent logs it (at
// debug level): a step's calls are due within the throttle's millisecond,
// and one that holds a worker for tens of ms lets a writer run unseen.
const SlowCall = 5 * time.Millisecond

// call is one host call in progress.
type call struct {
	cg    host.Cgroup
	what  string
	since time.Time
}

// begin records a call to what on cg and returns the function that ends
// the record.
func (f *inflight) begin(cg host.Cgroup, what string) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[uint64]call{}
	}
	id := f.next
	f.next++
	c := call{cg: cg, what: what, since: time.Now()}
	f.calls[id] = c
	return func() {
		f.mu.Lock()
		delete(f.calls, id)
		f.mu.Unlock()
		if took := time.Since(c.since); f.slow != nil && took >= SlowCall {
			f.slow(c, took)
		}
	}
}

// list describes the calls in progress, oldest first.
func (f *inflight) list(now time.Time) []string {
	f.mu.Lock()
	cs := make([]call, 0, len(f.calls))
	for _, c := range f.calls {
		cs = append(cs, c)
	}
	f.mu.Unlock()
	slices.SortFunc(cs, func(a, b call) int { return a.since.Compare(b.since) })
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = fmt.Sprintf("%s %s for %v", c.what, c.cg, now.Sub(c.since).Round(time.Millisecond))
	}
	return out
}
