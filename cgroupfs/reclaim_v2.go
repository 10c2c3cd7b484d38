package cgroupfs

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/memcgd/memcgd/host"
	"golang.org/x/sys/unix"
)

// reclaimV2 writes memory.reclaim in steps of at most ReclaimChunk until
// the kernel has acknowledged n bytes or returns EAGAIN, and returns the
// fall in memory.current.
//
// The kernel (mm/memcontrol.c memory_reclaim; mm/vmscan.c
// user_proactive_reclaim since 6.17) loops try_to_free_mem_cgroup_pages
// until the request is met and returns EAGAIN after 16 rounds without
// progress, having kept what it did reclaim. EINTR (a signal arrived) is
// retried by os.File.Write.
func reclaimV2(ctx context.Context, dir string, n uint64) (uint64, error) {
	current := filepath.Join(dir, "memory.current")
	file := filepath.Join(dir, "memory.reclaim")
	before, err := readUint(current)
	if err != nil {
		return 0, err
	}
	var asked uint64
	var short bool
	for asked < n && !short {
		if err := ctx.Err(); err != nil {
			return reclaimedSince(current, before, err)
		}
		chunk := min(n-asked, ReclaimChunk)
		err := writeControl(file, strconv.FormatUint(chunk, 10))
		switch {
		case errors.Is(err, unix.EAGAIN):
			short = true
		case err != nil:
			return reclaimedSince(current, before, err)
		}
		asked += chunk
	}
	got, err := reclaimedSince(current, before, nil)
	if err == nil && got == 0 && short {
		err = fmt.Errorf("%w: %s answered EAGAIN", host.ErrNothingReclaimed, file)
	}
	return got, err
}

// reclaimedSince reads usage again and returns its fall from before, along
// with cause (the error that ended the reclaim, if any).
func reclaimedSince(usage string, before uint64, cause error) (uint64, error) {
	after, err := readUint(usage)
	if err != nil {
		return 0, errors.Join(cause, err)
	}
	return fell(before, after), cause
}
