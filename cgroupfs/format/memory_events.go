package format

// MemoryEvents is cgroup v2's memory.events or memory.events.local
// (mm/memcontrol.c, __memory_events_show): how many times each boundary
// was hit. See Documentation/admin-guide/cgroup-v2.rst.
type MemoryEvents struct {
	// Low counts reclaim below memory.low; High, throttling above
	// memory.high; Max, charges that hit memory.max.
	Low, High, Max uint64
	// OOM counts the OOM killer's invocations, OOMKill its victims in the
	// cgroup, OOMGroupKill group kills (5.17+).
	OOM, OOMKill, OOMGroupKill uint64
}

// field returns where the value of key goes.
func (e *MemoryEvents) field(key []byte) *uint64 {
	switch string(key) {
	case "low":
		return &e.Low
	case "high":
		return &e.High
	case "max":
		return &e.Max
	case "oom":
		return &e.OOM
	case "oom_kill":
		return &e.OOMKill
	case "oom_group_kill":
		return &e.OOMGroupKill
	}
	return nil
}

// ParseMemoryEvents parses memory.events into e, which it resets first.
func ParseMemoryEvents(b []byte, e *MemoryEvents) error {
	*e = MemoryEvents{}
	return parseKeyed("memory.events", b, e.field)
}
