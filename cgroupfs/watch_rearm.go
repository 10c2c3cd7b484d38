package cgroupfs

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/host"
)

// Moving the threshold of a v1 watch registers a new eventfd through
// cgroup.event_control, and the kernel's registration of a usage
// threshold waits for an RCU grace period
// (mm/memcontrol-v1.c, __mem_cgroup_usage_register_event:
// synchronize_rcu): 7 to 111 ms on the loaded v1 host. Made inside
// Watch, that held the caller (the agent's loop, whose every freeze and
// thaw waits behind it) and the Watcher's mu, which the eBPF tracker's
// wake-ups take on their way to the queue: a thawed writer ran unseen
// meanwhile. So Watch only records the new threshold, and one goroutine
// makes the registrations, without mu, latest threshold first served:
//
//   - from the Watch call on, the old registration's signals are judged
//     against the new threshold (handleV1 compares usage with wt.wake),
//     so a threshold moved up is not reported for crossing the old one;
//   - a threshold moved down is crossed unsignalled until the new
//     registration is made: usage is read right after it, and reported
//     if at or above the threshold, as a new watch's is;
//   - a registration overtaken by another Watch, an Unwatch, a removal
//     or Close is closed unused.

// queueRearmV1 records wake as wt's and has the re-arming goroutine
// register it. The caller holds mu.
func (w *Watcher) queueRearmV1(wt *watched, wake host.Wake) {
	wt.wake = wake
	w.rearm[wt] = true
	select {
	case w.rearmKick <- struct{}{}:
	default:
	}
}

// rearmLoop makes the registrations queueRearmV1 asked for, until Close.
func (w *Watcher) rearmLoop() {
	defer close(w.rearmDone)
	r := NewReader(w.layout) // the loop's reader is used under mu only
	for {
		select {
		case <-w.rearmKick:
		case <-w.done:
			return
		}
		for {
			w.mu.Lock()
			var wt *watched
			for c := range w.rearm {
				wt = c
				break
			}
			var wake host.Wake
			if wt != nil {
				delete(w.rearm, wt)
				wake = wt.wake
				w.rearming++
			}
			closed := w.closed
			w.mu.Unlock()
			if wt == nil || closed {
				break
			}
			w.rearmV1(r, wt, wake)
		}
	}
}

// rearmV1 registers wake for wt, without mu, and installs it if it is
// still wt's threshold and wt still watched.
func (w *Watcher) rearmV1(r *Reader, wt *watched, wake host.Wake) {
	efd, err := w.registeredEventfd(wt.cg, wake)
	var failcnt, usage uint64
	if err == nil {
		failcnt, usage, err = readV1Counts(r, w.layout, wt.cg)
		if err != nil {
			unix.Close(efd)
		}
	}
	w.mu.Lock()
	defer w.unlock()
	w.rearming--
	current := !w.closed && w.watches[wt.cg] == wt && wt.wake == wake
	switch {
	case !current:
		if err == nil {
			unix.Close(efd)
		}
	case err != nil:
		// Gone, or unreadable: the agent must look at it either way, as
		// after a failed read on the notification path; the old
		// registration stays for a cgroup still there.
		w.report(wt.cg)
		if errors.Is(err, host.ErrVanished) {
			w.drop(wt)
			return
		}
		w.failedRearm(wt, err)
	default:
		if err := w.installV1(wt, wake, efd, failcnt, usage); err != nil {
			w.failedRearm(wt, err)
		}
	}
}

// failedRearm goes back to the threshold the kernel still has registered
// for wt, so that the next Watch with the moved one tries again, and
// logs err. The caller holds mu.
func (w *Watcher) failedRearm(wt *watched, err error) {
	wt.wake = wt.armed
	w.opts.Logger.Warn("watch: move the usage threshold", "cgroup", wt.cg, "err", err)
}
