package act

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/dirtytrack"
	"github.com/memcgd/memcgd/cgroupfs/safeio"
)

// WriteOutTracked starts write-out of inodes, files the eBPF tracker
// recorded for a cgroup (all of them, or only the ones its subtree
// dirtied last), except those in done: under bio, one bounded operation
// per filesystem, starting new files only within budget. It returns how
// many it started.
func WriteOutTracked(ctx context.Context, bio *safeio.BoundedIO, tr *dirtytrack.Tracker, inodes []dirtytrack.Inode,
	done *FileSet, budget time.Duration) (int, error) {
	byDev := make(map[uint64][]dirtytrack.Inode)
	var devs []uint64
	for _, ino := range inodes {
		if done.has(ino.Dev, ino.Ino) {
			continue
		}
		if byDev[ino.Dev] == nil {
			devs = append(devs, ino.Dev)
		}
		byDev[ino.Dev] = append(byDev[ino.Dev], ino)
	}
	if len(devs) == 0 {
		return 0, nil
	}
	// The budget stops new files from being started; one started runs
	// to its end, bounded by bio (sync_file_range may wait for room in
	// the device's request queue).
	bctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	var started atomic.Int64
	var errs []error
	for _, dev := range devs {
		if bctx.Err() != nil {
			break // the rest waits for the next write-out, or the flush
		}
		group := byDev[dev]
		var werr error
		err := bio.Do(ctx, safeio.DeviceKey(dev), func() {
			var res dirtytrack.WriteOutResult
			res, werr = tr.WriteOutInodes(bctx, group)
			started.Add(int64(res.Files))
		})
		if err == nil && !errors.Is(werr, context.DeadlineExceeded) {
			err = werr
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return int(started.Load()), errors.Join(errs...)
}
