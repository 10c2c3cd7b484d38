package kernel

// The cgroup freezer as memcgd uses it to throttle a cgroup: cgroup.freeze
// on v2 (kernel/cgroup/freezer.c, cgroup_freeze) and freezer.state on v1
// (kernel/cgroup/legacy_freezer.c). A frozen task stops at its next system
// call, as a real one stops at its next return to user mode or freezable
// sleep: a write(2) in progress completes, a sleep it is in (a
// balance_dirty_pages pause) runs its course, and then it neither dirties
// nor charges until thawed. Freeze (task.go) is the timed form, a pause
// of a given length; FreezeCgroup and ThawCgroup hold a freeze across the
// driver's steps.

// FreezeCgroup freezes m and its descendants until ThawCgroup.
func (k *Kernel) FreezeCgroup(m int32) { k.memcgs[m].frozen = true }

// ThawCgroup thaws m: its tasks stopped by the freeze run again now.
func (k *Kernel) ThawCgroup(m int32) {
	k.memcgs[m].frozen = false
	for _, t := range k.tasks {
		if t.freezeWait && !k.cgroupFrozen(t.memcg) {
			t.freezeWait = false
			k.wake(t)
		}
	}
}

// CgroupFrozen reports whether m is frozen by FreezeCgroup.
func (k *Kernel) CgroupFrozen(m int32) bool { return k.memcgs[m].frozen }

// cgroupFrozen reports whether m or an ancestor is frozen.
func (k *Kernel) cgroupFrozen(m int32) bool {
	for c := m; c != nilIdx; c = k.memcgs[c].parent {
		if k.memcgs[c].frozen {
			return true
		}
	}
	return false
}

// stopFrozen stops t at a system call if it is frozen, held or timed, and
// reports whether it did. The time counts as paused.
func (k *Kernel) stopFrozen(t *Task) bool {
	if k.cgroupFrozen(t.memcg) {
		t.freezeWait = true
		k.block(t, StopFrozen)
		return true
	}
	if t.frozenUntil > t.clock {
		k.sleep(t, t.frozenUntil, StopFrozen)
		return true
	}
	return false
}
