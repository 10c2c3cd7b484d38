package dirtytrack

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// dirtierLen is the length of each watched cgroup's ring of dirtying
// threads; it must match DIRTIERS in bpf/dirtytrack.c.
const dirtierLen = 8

// A Dirtier is a thread of a watched cgroup that dirtied the cgroup's
// pages, and how long ago it last did. The program refreshes a thread's
// time when it dirties a folio after another thread of the cgroup did, and
// every 16 folios it dirties in a row, so a thread streaming large folios
// may read up to 16 folios' time older than it is.
type Dirtier struct {
	TID int
	Age time.Duration
}

// Dirtiers returns the threads of the watched cgroup id's own tasks (not
// its descendants') that dirtied its pages, the last eight to begin doing
// so since it was first watched, most recent first. A kernel thread never
// counts. A TID may have exited since, and been reused.
func (t *Tracker) Dirtiers(id uint64) ([]Dirtier, error) {
	t.mu.Lock()
	slot, ok := t.slots[id]
	t.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("dirtytrack: dirtiers of cgroup %d: %w", id, ErrNotWatched)
	}
	var d dirtytrackDirtiers
	if err := t.objs.Dirtiers.Lookup(slot, &d); err != nil {
		return nil, fmt.Errorf("dirtytrack: dirtiers of cgroup %d: %w", id, err)
	}
	now := uint32(MonotonicNow() / time.Millisecond)
	return dirtiersOf(d, now), nil
}

// dirtiersOf lists the threads in ring d at now (milliseconds of
// CLOCK_MONOTONIC, wrapping as the program's), most recent first.
func dirtiersOf(d dirtytrackDirtiers, now uint32) []Dirtier {
	out := make([]Dirtier, 0, min(d.N, dirtierLen))
	for _, e := range d.T {
		if e.Tid == 0 {
			continue
		}
		// Wrapping arithmetic: the program's time may be a little ahead
		// of now, read a moment before.
		age := int32(now - e.Ms)
		out = append(out, Dirtier{TID: int(e.Tid), Age: time.Duration(max(age, 0)) * time.Millisecond})
	}
	slices.SortFunc(out, func(a, b Dirtier) int {
		return cmp.Or(cmp.Compare(a.Age, b.Age), cmp.Compare(a.TID, b.TID))
	})
	return out
}

// ArmDirtier asks for one NewDirtier event when a thread that is not in the
// watched cgroup id's ring of dirtiers (Dirtiers) begins to dirty its
// pages. Like Watch's wake-up it is sent once per call: the caller arms it
// again after handling it, and a tenant that starts threads by the
// thousand cannot storm the daemon. Arm it before listing Dirtiers, so
// that a thread that begins between the two is reported.
func (t *Tracker) ArmDirtier(id uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	slot, ok := t.slots[id]
	if !ok {
		return fmt.Errorf("dirtytrack: arm the dirtier report of cgroup %d: %w", id, ErrNotWatched)
	}
	if err := t.rearm(slot, func(w *dirtytrackWake, seq uint64) { w.DirtierSeq = seq }); err != nil {
		return fmt.Errorf("dirtytrack: arm the dirtier report of cgroup %d: %w", id, err)
	}
	return nil
}
