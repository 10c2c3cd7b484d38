package format

// MemoryStatV2 is cgroup v2's memory.stat (mm/memcontrol.c, memory_stat_format:
// memory_stats[] then memcg_vm_event_stat[]; Documentation/admin-guide/
// cgroup-v2.rst). All figures include the cgroup's descendants. Sizes are
// bytes; the Pg* fields and WorkingsetRefaultFile are event counts.
type MemoryStatV2 struct {
	Anon, File, FileMapped, FileDirty, FileWriteback, Shmem uint64
	InactiveAnon, ActiveAnon                                uint64
	InactiveFile, ActiveFile                                uint64
	Unevictable                                             uint64
	WorkingsetRefaultFile                                   uint64

	// HasReclaim reports that the pgscan_* and pgsteal_* lines were
	// present. Older kernels lack them, and a counter they lack must not
	// read as a zero.
	HasReclaim                   bool
	Pgscan, Pgsteal              uint64
	PgscanKswapd, PgscanDirect   uint64
	PgstealKswapd, PgstealDirect uint64
	Pgrefill                     uint64
	Pgfault, Pgmajfault          uint64
}

// field returns where the value of key goes.
func (s *MemoryStatV2) field(key []byte) *uint64 {
	switch string(key) { // compiled without a conversion, so no allocation
	case "anon":
		return &s.Anon
	case "file":
		return &s.File
	case "file_mapped":
		return &s.FileMapped
	case "file_dirty":
		return &s.FileDirty
	case "file_writeback":
		return &s.FileWriteback
	case "shmem":
		return &s.Shmem
	case "inactive_anon":
		return &s.InactiveAnon
	case "active_anon":
		return &s.ActiveAnon
	case "inactive_file":
		return &s.InactiveFile
	case "active_file":
		return &s.ActiveFile
	case "unevictable":
		return &s.Unevictable
	case "workingset_refault_file":
		return &s.WorkingsetRefaultFile
	case "pgscan":
		return &s.Pgscan
	case "pgsteal":
		return &s.Pgsteal
	case "pgscan_kswapd":
		s.HasReclaim = true
		return &s.PgscanKswapd
	case "pgscan_direct":
		s.HasReclaim = true
		return &s.PgscanDirect
	case "pgsteal_kswapd":
		s.HasReclaim = true
		return &s.PgstealKswapd
	case "pgsteal_direct":
		s.HasReclaim = true
		return &s.PgstealDirect
	case "pgrefill":
		return &s.Pgrefill
	case "pgfault":
		return &s.Pgfault
	case "pgmajfault":
		return &s.Pgmajfault
	}
	return nil
}

// ParseMemoryStatV2 parses v2 memory.stat into s, which it resets first.
func ParseMemoryStatV2(b []byte, s *MemoryStatV2) error {
	*s = MemoryStatV2{}
	return parseKeyed("memory.stat", b, s.field)
}
