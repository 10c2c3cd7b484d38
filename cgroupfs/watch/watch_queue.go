package watch

import "github.com/memcgd/memcgd/host"

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
	// cgroup's latest, and lastOnce of its latest from a source that
	// reports once per Watch (the eBPF tracker). A report made after the
	// receipt of a cgroup but before its pop must queue it again, not
	// coalesce into the one received: such a source would not report
	// again (send).
	seq      uint64
	last     map[host.Cgroup]uint64
	lastOnce map[host.Cgroup]uint64
}

func newWakeQueue(size int) wakeQueue {
	return wakeQueue{ring: make([]host.Cgroup, size), queued: make(map[host.Cgroup]bool),
		last: make(map[host.Cgroup]uint64), lastOnce: make(map[host.Cgroup]uint64)}
}

// push queues cg unless it is queued already, and reports false if the
// ring is full. once says the report's source reports once per Watch.
func (q *wakeQueue) push(cg host.Cgroup, once bool) bool {
	if !q.queued[cg] {
		if q.n == len(q.ring) {
			return false
		}
		q.ring[(q.head+q.n)%len(q.ring)] = cg
		q.n++
		q.queued[cg] = true
	}
	q.seq++
	q.last[cg] = q.seq
	if once {
		q.lastOnce[cg] = q.seq
	}
	return true
}

// front returns the oldest queued cgroup, if any, and the number of its
// latest report, for pop.
func (q *wakeQueue) front() (cg host.Cgroup, seen uint64, ok bool) {
	if q.n == 0 {
		return "", 0, false
	}
	cg = q.ring[q.head]
	return cg, q.last[cg], true
}

// pop removes the oldest queued cgroup, whose latest report had the
// number seen when it was received, and queues it again if it was
// reported since; with onceOnly, only by a source that reports once per
// Watch.
func (q *wakeQueue) pop(seen uint64, onceOnly bool) {
	cg := q.ring[q.head]
	again, once := q.last[cg] > seen, q.lastOnce[cg] > seen
	if onceOnly {
		again = once
	}
	delete(q.queued, cg)
	delete(q.last, cg)
	delete(q.lastOnce, cg)
	q.ring[q.head] = ""
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	if again {
		q.push(cg, once)
	}
}

// report queues cg for Events unless it is queued already.
func (w *Watcher) report(cg host.Cgroup) { w.reportFrom(cg, false) }

// reportOnce is report for a source that reports once per Watch (the
// eBPF tracker): its report is never coalesced into one already on its
// way to the receiver.
func (w *Watcher) reportOnce(cg host.Cgroup) { w.reportFrom(cg, true) }

func (w *Watcher) reportFrom(cg host.Cgroup, once bool) {
	if !w.queue.push(cg, once) {
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
		cg, seen, ok := w.queue.front()
		w.mu.Unlock()
		if !ok {
			select {
			case <-w.kick:
				continue
			case <-w.done:
				return
			}
		}
		// A receiver already waiting (the agent's loop idle in its
		// select) takes it at once: the receipt is now, and a report
		// made since the number was read came after it.
		select {
		case w.out <- cg:
			w.mu.Lock()
			w.queue.pop(seen, false)
			w.mu.Unlock()
			continue
		default:
		}
		// Otherwise the kernel's reports made while it waits coalesce
		// into it (a storm of vmpressure events is one report), and so
		// do those made between the receipt and this goroutine's next
		// run, which cannot be told apart: the kernel reports again
		// while the condition holds. A report from a source that
		// reports once per Watch made since the number was read
		// queues it again, at the cost of a report received twice
		// when it came before the receipt: lost, it left a writer
		// unseen (TestTrackedWatcherReportsDirtiedAbove, 1 write in
		// about 300, once the tracker's wake-ups reached the Watcher
		// without a hand-off between goroutines).
		select {
		case w.out <- cg:
		case <-w.done:
			return
		}
		w.mu.Lock()
		w.queue.pop(seen, true)
		w.mu.Unlock()
	}
}
