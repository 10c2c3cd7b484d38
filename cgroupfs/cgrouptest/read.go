package cgrouptest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/layout"
)

// These read the kernel's files as a reference for the code under test:
// with strings and strconv, independent of package format and of the
// readers the tests check.

// StatFile reads the keys of the cgroup's memory.stat at dir.
func StatFile(t testing.TB, dir string) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]uint64{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, " ")
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			m[k] = n
		}
	}
	return m
}

// ValueFile reads the single-number file name of the cgroup at dir.
func ValueFile(t testing.TB, dir, name string) uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// ProcValue reads a number from a procfs file: the value of key in a
// "key value" file such as /proc/vmstat, or the whole file if key is "".
func ProcValue(t testing.TB, file, key string) uint64 {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(b))
	if key != "" {
		v = ""
		for _, line := range strings.Split(string(b), "\n") {
			if k, rest, ok := strings.Cut(line, " "); ok && k == key {
				v = rest
			}
		}
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("%s %s: %q is not a number", file, key, v)
	}
	return n
}

// Usage reads c's charged memory: v1 memory.usage_in_bytes, v2
// memory.current.
func (c *Cgroup) Usage(t testing.TB) uint64 {
	t.Helper()
	if c.layout.Memory.Version == layout.V1 {
		return ValueFile(t, c.Dir, "memory.usage_in_bytes")
	}
	return ValueFile(t, c.Dir, "memory.current")
}

// Dirty reads c's dirty page cache, its descendants' included: v1's
// total_dirty, v2's file_dirty of memory.stat.
func (c *Cgroup) Dirty(t testing.TB) uint64 {
	t.Helper()
	key := "file_dirty"
	if c.layout.Memory.Version == layout.V1 {
		key = "total_dirty"
	}
	v, ok := StatFile(t, c.Dir)[key]
	if !ok {
		t.Fatalf("%s/memory.stat has no %s", c.Dir, key)
	}
	return v
}

// DirtySize is how much a writer of the write-out and flush tests
// dirties: 48 MiB, or a quarter of the global background threshold if that
// is less (a small VM), so that the flushers' background writeback leaves
// the pages dirty (mm/page-writeback.c domain_dirty_limits). The writers'
// cgroups have no limit, which on v2 would shrink the memcg's own dirty
// domain (mdtc_calc_avail) and start background writeback sooner.
func DirtySize(t testing.TB) int64 {
	const mib = 1 << 20
	return min(48*mib, int64(BackgroundThreshold(t)/4)) &^ (mib - 1)
}

// BackgroundThreshold is the global dirty background threshold in bytes,
// from /proc/vmstat: past it the flushers write back every dirty page.
func BackgroundThreshold(t testing.TB) uint64 {
	t.Helper()
	return ProcValue(t, "/proc/vmstat", "nr_dirty_background_threshold") * uint64(os.Getpagesize())
}

// VMSlack is how much longer than on real hardware a bound on the
// kernel's reaction may need: a second, and four under qemu's emulation
// (MEMCGD_VM=1), which runs the kernel several times slower.
func VMSlack() time.Duration {
	if os.Getenv("MEMCGD_VM") == "1" {
		return 4 * time.Second
	}
	return time.Second
}
