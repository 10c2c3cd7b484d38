package act

import (
	"context"
	"log/slog"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/journal"
)

// Exported for the real-kernel tests, which live in package act_test
// because cgrouptest imports packages this one imports.

// WithSyncfs returns o with syncfs(2) replaced by f.
func WithSyncfs(o FlushOptions, f func(fd int) error) FlushOptions {
	o.syncfs = f
	return o
}

// WithClock returns o with the clock replaced by now.
func WithClock(o FlushOptions, now func() time.Time) FlushOptions {
	o.now = now
	return o
}

// SqueezeV1 is squeezeV1, logging nowhere.
func SqueezeV1(ctx context.Context, dir string, n uint64, j *journal.Journal) (uint64, error) {
	return squeezeV1(ctx, dir, n, 0, j, slog.New(slog.DiscardHandler))
}
