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

// pageSize rounds the squeeze's targets; the kernel keeps limits in pages
// (mm/page_counter.c) and rounds a byte limit down.
const pageSize = 4096

// squeezeV1 reclaims by lowering v1's memory.limit_in_bytes below usage and
// putting it back, in steps of at most ReclaimChunk, never aiming below
// usage-at-start minus n. It returns the fall in memory.usage_in_bytes.
//
// Writing a limit below usage makes the writer reclaim
// (mm/memcontrol-v1.c mem_cgroup_resize_max): it drains the per-cpu charge
// stock, then calls try_to_free_mem_cgroup_pages until usage fits and only
// then sets the limit (mm/page_counter.c page_counter_set_max), or fails
// with EBUSY, limit unchanged, once reclaim makes no progress. So the
// kernel picks the pages (its LRU order, the cgroup's whole page cache),
// the write fails rather than OOM-kill, and the lowered limit is in force
// only between the write's return and the restore that follows it at once.
// The original limit is recorded in j first, so a crash in that window is
// undone by the next run's Recover.
//
// The other way, posix_fadvise(POSIX_FADV_DONTNEED) on the files the
// cgroup's tasks have open, reaches only files still open, drops pages
// whatever their age, and cannot drop dirty ones; reclaim_v1_test.go
// measures it against the squeeze (docs/actuators.md).
func squeezeV1(ctx context.Context, dir string, n uint64, j *Journal) (got uint64, err error) {
	if j == nil {
		return 0, errors.New("a v1 limit squeeze needs a journal; got nil")
	}
	usage := filepath.Join(dir, "memory.usage_in_bytes")
	limit := filepath.Join(dir, fileLimitV1)
	before, err := readUint(usage)
	if err != nil {
		return 0, err
	}
	floor := alignUp(before-min(n, before), pageSize)

	id, original, err := j.begin(limit)
	if err != nil {
		return 0, err
	}
	restore := func() error {
		err := writeControl(limit, original)
		if err != nil && !errors.Is(err, host.ErrVanished) {
			return err // stays pending: Recover retries it
		}
		return errors.Join(err, j.Done(id))
	}

	var busy bool
	for !busy {
		if err = ctx.Err(); err != nil {
			break
		}
		var u uint64
		if u, err = readUint(usage); err != nil {
			break
		}
		if u <= floor {
			break
		}
		target := max(u-min(u, ReclaimChunk), floor)
		err = writeControl(limit, strconv.FormatUint(target, 10))
		if errors.Is(err, unix.EBUSY) {
			busy, err = true, nil
		}
		if err != nil {
			break
		}
		if !busy {
			if err = writeControl(limit, original); err != nil {
				break
			}
		}
	}
	if rerr := restore(); rerr != nil {
		err = errors.Join(err, fmt.Errorf("restore limit %s: %w", original, rerr))
	}
	got, err = reclaimedSince(usage, before, err)
	if err == nil && got == 0 && busy {
		err = fmt.Errorf("%w: %s answered EBUSY", host.ErrNothingReclaimed, limit)
	}
	return got, err
}

func alignUp(v, a uint64) uint64 { return (v + a - 1) &^ (a - 1) }
