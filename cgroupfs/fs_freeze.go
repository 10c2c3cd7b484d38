package cgroupfs

import (
	"context"

	"github.com/memcgd/memcgd/host"
)

var _ host.Freezer = (*FS)(nil)

// Freeze starts a throttle episode of cg (see Freeze): frozen now, one
// journal record, ended when ctx ends at the latest.
func (fs *FS) Freeze(ctx context.Context, cg host.Cgroup) (host.Frozen, error) {
	f, err := Freeze(ctx, fs.layout, cg, fs.journal)
	if err != nil {
		return nil, err
	}
	return f, nil
}
