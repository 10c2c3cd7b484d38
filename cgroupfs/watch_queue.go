package cgroupfs

import (
	"sync/atomic"

	"github.com/memcgd/memcgd/host"
)

// wakeQueue is the Watcher's queue of reported cgroups not yet received:
// a ring, oldest at head, in which a cgroup occupies at most one place
// (queued holds the same cgroups), so that reports of one cgroup coalesce
// and cannot crowd out others. The Watcher's mu guards it.
type wakeQueue struct {
	ring   []host.Cgroup
	head   int
	n      int
	queued map[host.Cgroup]bool
	// seq numbers the reports; last is the number of each queued
	// cgroup's latest. The receipt of a cgroup and the pop that follows
	// it are not one step: a report between them would coalesce into
	// one already received and be lost, and a source that reports once
	// per Watch (the eBPF tracker) would not report again. send reads
	// seq right after the receipt; a later report queues the cgroup again
	// at the pop. (Only a report in the few instructions between the
	// receipt and that read can still coalesce, unless the sender is
	// preempted exactly there.)
	seq  atomic.Uint64
	last map[host.Cgroup]uint64
}

func newWakeQueue(size int) wakeQueue {
	return wakeQueue{ring: make([]host.Cgroup, size), queued: make(map[host.Cgroup]bool), last: make(map[host.Cgroup]uint64)}
}

// push queues cg unless it is queued already, and reports false if the
// ring is full.
func (q *wakeQueue) push(cg host.Cgroup) bool {
	if q.queued[cg] {
		q.last[cg] = q.seq.Add(1)
		return true
	}
	if q.n == len(q.ring) {
		return false
	}
	q.ring[(q.head+q.n)%len(q.ring)] = cg
	q.n++
	q.queued[cg] = true
	q.last[cg] = q.seq.Add(1)
	return true
}

// front returns the oldest queued cgroup, if any.
func (q *wakeQueue) front() (host.Cgroup, bool) {
	if q.n == 0 {
		return "", false
	}
	return q.ring[q.head], true
}

// pop removes the oldest queued cgroup, received when seq was received,
// and queues it again if it was reported since.
func (q *wakeQueue) pop(received uint64) {
	cg := q.ring[q.head]
	again := q.last[cg] > received
	delete(q.queued, cg)
	delete(q.last, cg)
	q.ring[q.head] = ""
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	if again {
		q.push(cg)
	}
}

// report queues cg for Events unless it is queued already.
func (w *Watcher) report(cg host.Cgroup) {
	if !w.queue.push(cg) {
		w.dropped.Add(1)
		return
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// send hands the queued cgroups to the receiver, oldest first. A cgroup
// leaves the queue, and may be queued again, only once received.
func (w *Watcher) send() {
	defer close(w.sendDone)
	defer close(w.out)
	for {
		w.mu.Lock()
		cg, ok := w.queue.front()
		w.mu.Unlock()
		if !ok {
			select {
			case <-w.kick:
				continue
			case <-w.done:
				return
			}
		}
		select {
		case w.out <- cg:
		case <-w.done:
			return
		}
		received := w.queue.seq.Load()
		w.mu.Lock()
		w.queue.pop(received)
		w.mu.Unlock()
	}
}
