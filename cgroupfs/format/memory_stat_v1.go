package format

import (
	"bytes"

	"github.com/memcgd/memcgd/memcg"
)

// MemoryStatV1 is cgroup v1's memory.stat (mm/memcontrol-v1.c,
// memcg1_stat_format; Documentation/admin-guide/cgroup-v1/memory.rst 5.2).
type MemoryStatV1 struct {
	// Local are the cgroup's own figures ("cache", "rss", ...).
	Local MemoryStatV1Counts
	// Total are the figures of the cgroup and its descendants
	// ("total_cache", "total_rss", ...).
	Total MemoryStatV1Counts
	// HierarchicalMemoryLimit is the lowest memory.limit_in_bytes of the
	// cgroup and its ancestors, memcg.NoLimit when none has a limit.
	HierarchicalMemoryLimit uint64
}

// MemoryStatV1Counts are the figures v1 memory.stat prints once for the
// cgroup alone and once, prefixed "total_", with its descendants. Sizes are
// bytes; the Pg* fields are event counts (pgpgin/pgpgout in pages).
type MemoryStatV1Counts struct {
	Cache, RSS, Shmem, MappedFile uint64
	Dirty, Writeback, Swap        uint64
	WorkingsetRefaultFile         uint64
	Pgpgin, Pgpgout               uint64
	Pgfault, Pgmajfault           uint64
	InactiveAnon, ActiveAnon      uint64
	InactiveFile, ActiveFile      uint64
	Unevictable                   uint64
}

// field returns where the value of key (without "total_") goes.
func (c *MemoryStatV1Counts) field(key []byte) *uint64 {
	switch string(key) { // compiled without a conversion, so no allocation
	case "cache":
		return &c.Cache
	case "rss":
		return &c.RSS
	case "shmem":
		return &c.Shmem
	case "mapped_file":
		return &c.MappedFile
	case "dirty":
		return &c.Dirty
	case "writeback":
		return &c.Writeback
	case "swap":
		return &c.Swap
	case "workingset_refault_file":
		return &c.WorkingsetRefaultFile
	case "pgpgin":
		return &c.Pgpgin
	case "pgpgout":
		return &c.Pgpgout
	case "pgfault":
		return &c.Pgfault
	case "pgmajfault":
		return &c.Pgmajfault
	case "inactive_anon":
		return &c.InactiveAnon
	case "active_anon":
		return &c.ActiveAnon
	case "inactive_file":
		return &c.InactiveFile
	case "active_file":
		return &c.ActiveFile
	case "unevictable":
		return &c.Unevictable
	}
	return nil
}

var totalPrefix = []byte("total_")

// ParseMemoryStatV1 parses v1 memory.stat into s, which it resets first.
func ParseMemoryStatV1(b []byte, s *MemoryStatV1) error {
	*s = MemoryStatV1{}
	err := parseKeyed("memory.stat", b, func(key []byte) *uint64 {
		if k, ok := bytes.CutPrefix(key, totalPrefix); ok {
			return s.Total.field(k)
		}
		if string(key) == "hierarchical_memory_limit" {
			return &s.HierarchicalMemoryLimit
		}
		return s.Local.field(key)
	})
	if s.HierarchicalMemoryLimit >= v1Unlimited {
		s.HierarchicalMemoryLimit = memcg.NoLimit
	}
	return err
}
