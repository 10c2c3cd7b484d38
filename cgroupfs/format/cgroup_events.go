package format

// CgroupEvents is cgroup v2's cgroup.events (kernel/cgroup/cgroup.c,
// cgroup_events_show): whether the cgroup's subtree holds a live task,
// and whether it is frozen.
type CgroupEvents struct {
	// Populated is 1 while the cgroup or a descendant holds a live task.
	Populated uint64
	// Frozen is 1 once every task of the cgroup and its descendants has
	// stopped after a freeze (kernel/cgroup/freezer.c
	// cgroup_update_frozen); 0 while a freeze is still taking hold or the
	// cgroup is thawed. Kernels before 5.2 have no freezer and no such key.
	Frozen uint64
	// HasFrozen reports that the kernel printed the frozen key.
	HasFrozen bool
}

// ParseCgroupEvents parses cgroup.events into e, which it resets first.
func ParseCgroupEvents(b []byte, e *CgroupEvents) error {
	*e = CgroupEvents{}
	return parseKeyed("cgroup.events", b, func(key []byte) *uint64 {
		switch string(key) {
		case "populated":
			return &e.Populated
		case "frozen":
			e.HasFrozen = true
			return &e.Frozen
		}
		return nil
	})
}
