package format

// MemoryOOMControl is cgroup v1's memory.oom_control
// (mm/memcontrol-v1.c mem_cgroup_oom_control_read).
type MemoryOOMControl struct {
	// OOMKillDisable is 1 when the OOM killer is off for the cgroup: a
	// charge that cannot be met then waits, the task hung, until memory is
	// freed or the limit raised.
	OOMKillDisable uint64
	// UnderOOM is 1 while the cgroup is in OOM (a charge failed and waits
	// or is being resolved).
	UnderOOM uint64
	// OOMKill counts the tasks the OOM killer killed in the cgroup (4.13+).
	OOMKill uint64
	// HasOOMKill reports that the kernel printed the oom_kill key.
	HasOOMKill bool
}

// ParseMemoryOOMControl parses memory.oom_control into c, which it resets
// first.
func ParseMemoryOOMControl(b []byte, c *MemoryOOMControl) error {
	*c = MemoryOOMControl{}
	return parseKeyed("memory.oom_control", b, func(key []byte) *uint64 {
		switch string(key) {
		case "oom_kill_disable":
			return &c.OOMKillDisable
		case "under_oom":
			return &c.UnderOOM
		case "oom_kill":
			c.HasOOMKill = true
			return &c.OOMKill
		}
		return nil
	})
}
