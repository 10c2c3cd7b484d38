package kernel

// One-shot timers for an external driver (the memcgd variant's deadlines:
// NextLook, HoldFor, RunFor, a step after the reaction delay). A timer is
// armed again or stopped without allocating: a stale event carries an old
// generation and is dropped.

type timer struct {
	f     func(k *Kernel)
	gen   uint32
	armed bool
	at    Time
}

// NewTimer registers f as a one-shot timer, not armed.
func (k *Kernel) NewTimer(f func(k *Kernel)) int32 {
	k.timers = append(k.timers, timer{f: f})
	return int32(len(k.timers) - 1)
}

// ArmTimer makes timer id fire at at (not before now), replacing any
// earlier arming.
func (k *Kernel) ArmTimer(id int32, at Time) {
	tm := &k.timers[id]
	tm.gen++
	tm.armed, tm.at = true, max(at, k.now)
	k.heap.push(tm.at, evTimer, id, tm.gen)
}

// StopTimer disarms timer id.
func (k *Kernel) StopTimer(id int32) {
	tm := &k.timers[id]
	if tm.armed {
		tm.gen++
		tm.armed = false
	}
}

// TimerArmed reports whether timer id is armed, and for when.
func (k *Kernel) TimerArmed(id int32) (Time, bool) {
	tm := &k.timers[id]
	return tm.at, tm.armed
}
