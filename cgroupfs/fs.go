package cgroupfs

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// FS is the real kernel as a host.Host: the memory cgroups of one subtree
// of the mounted hierarchy, observed through cgroupfs and acted on with
// the actuators of this package. Stateful actions go through its journal.
// FS is safe for concurrent use.
type FS struct {
	layout   Layout
	procRoot string
	under    host.Cgroup
	journal  *Journal

	readers sync.Pool // *Reader: each is single-goroutine
}

var (
	_ host.Host         = (*FS)(nil)
	_ host.DirtyCounter = (*FS)(nil)
)

// NewFS returns the host for the cgroups beneath under in layout l.
// journal may be nil only for a read-only FS (memcgd stat): then the
// stateful actions fail.
func NewFS(l Layout, procRoot string, under host.Cgroup, journal *Journal) *FS {
	fs := &FS{layout: l, procRoot: procRoot, under: under, journal: journal}
	fs.readers.New = func() any { return NewReader(l) }
	return fs
}

// Layout is the hierarchies FS works in.
func (fs *FS) Layout() Layout { return fs.layout }

// Cgroups lists the memory cgroups beneath (and including) the managed
// subtree, parents first.
func (fs *FS) Cgroups(ctx context.Context) ([]host.Cgroup, error) {
	return Walk(fs.layout.Memory, fs.under)
}

// Observe reads cg's state. The hierarchy root has no limit; FS reports
// the machine's memory as its limit and what is not free as its usage, so
// that headroom computed over a chain of ancestors ends at the machine's
// free memory, as the kernel's global dirtyable memory does
// (mm/page-writeback.c, global_dirtyable_memory).
func (fs *FS) Observe(ctx context.Context, cg host.Cgroup) (memcg.Stat, error) {
	r := fs.readers.Get().(*Reader)
	s, err := r.Observe(cg)
	fs.readers.Put(r)
	if err != nil {
		return s, err
	}
	if cg == "/" && s.Limit == memcg.NoLimit {
		m, err := readMemInfo(fs.procRoot)
		if err != nil {
			return s, err
		}
		s.Limit, s.Usage = m.Total, m.Total-m.Free
	}
	return s, nil
}

// Reclaim reclaims up to n bytes from cg; see the package function.
func (fs *FS) Reclaim(ctx context.Context, cg host.Cgroup, n uint64) (uint64, error) {
	if fs.journal == nil && fs.layout.Memory.Version == V1 {
		return 0, fmt.Errorf("reclaim %s: read-only host has no journal for the v1 limit squeeze", cg)
	}
	return Reclaim(ctx, fs.layout, cg, n, fs.journal)
}

// WriteOut starts write-out of cg's own files.
func (fs *FS) WriteOut(ctx context.Context, cg host.Cgroup) (host.WriteOut, error) {
	return WriteOut(ctx, fs.procRoot, fs.layout, cg)
}

// Flush writes out every dirty page on the filesystems cg writes to.
func (fs *FS) Flush(ctx context.Context, cg host.Cgroup) error {
	return Flush(ctx, fs.procRoot, fs.layout, cg)
}

// Pause freezes cg for d and thaws it.
func (fs *FS) Pause(ctx context.Context, cg host.Cgroup, d time.Duration) error {
	if fs.journal == nil {
		return fmt.Errorf("pause %s: read-only host has no journal", cg)
	}
	return Pause(ctx, fs.layout, cg, d, fs.journal)
}

// Now is the wall clock.
func (fs *FS) Now() time.Time { return time.Now() }

// Dirtied counts the bytes cg's tasks have dirtied; see the package function.
func (fs *FS) Dirtied(ctx context.Context, cg host.Cgroup) (uint64, error) {
	return Dirtied(ctx, fs.procRoot, fs.layout, cg)
}
