package cgroupfs

import (
	"context"
	"errors"
	"fmt"

	"github.com/memcgd/memcgd/host"
	"golang.org/x/sys/unix"
)

// Flush writes out every dirty page on the filesystems cg's tasks write to:
// syncfs(2) on each distinct filesystem (st_dev) among the files they have
// open for writing or mapped shared and writable, found as WriteOut finds
// them. If there are none, because the writers have closed their files, it
// falls back to sync(2) on every filesystem.
//
// This is what the kernel does when a cgroup's reclaim meets dirty pages
// (it wakes the flushers for the whole device, mm/vmscan.c
// shrink_inactive_list via wakeup_flusher_threads), and it is seed 000's
// fallback when targeted write-out finds too little: every cgroup's dirty
// pages on those filesystems are written, not only cg's. Unlike WriteOut,
// Flush waits: syncfs returns once the filesystem's dirty data and
// metadata are on disk (fs/sync.c sync_filesystem), so it can take as long
// as the device needs for all of it. ctx is checked between filesystems
// only; a syncfs in progress cannot be cancelled.
func Flush(ctx context.Context, procRoot string, l Layout, cg host.Cgroup) error {
	dir := l.Memory.Dir(cg)
	if dir == "" {
		return fmt.Errorf("flush %s: outside the mounted memory hierarchy %s", cg, l.Memory.Mount)
	}
	files, err := cgroupFiles(ctx, procRoot, dir, true)
	if err != nil {
		return fmt.Errorf("flush %s: %w", cg, err)
	}
	synced := make(map[uint64]bool)
	var errs []error
	for _, tf := range files {
		if synced[tf.dev] {
			continue
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		f, err := tf.reopen()
		if err != nil {
			continue // gone; another file may stand for its filesystem
		}
		err = unix.Syncfs(int(f.Fd()))
		f.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("syncfs %s: %w", tf.path, err))
		}
		synced[tf.dev] = true
	}
	if len(synced) == 0 && len(errs) == 0 {
		unix.Sync()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("flush %s: %w", cg, err)
	}
	return nil
}
