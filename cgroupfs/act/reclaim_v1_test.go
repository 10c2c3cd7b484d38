package act

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/host"
	"golang.org/x/sys/unix"
)

// FadviseV1 is exported for the measurement in reclaim_test.go.
var FadviseV1 = fadviseV1

// fadviseV1 reclaims by posix_fadvise(POSIX_FADV_DONTNEED) on the files the
// cgroup's tasks have open or mapped, a range of at most ReclaimChunk at a
// time, until usage has fallen by n. It returns the fall in usage.
//
// DONTNEED (mm/fadvise.c generic_fadvise) starts write-out of the range's
// dirty pages without waiting, then drops its clean, unmapped, unlocked
// pages (mm/truncate.c mapping_try_invalidate). It cannot reach page cache
// of files no task has open any more, and it drops pages whatever their
// age. It is the alternative to squeezeV1 that docs/actuators.md
// measures, kept here with the test that measures it; Reclaim squeezes.
func fadviseV1(ctx context.Context, procRoot, dir string, n uint64) (uint64, error) {
	usage := filepath.Join(dir, "memory.usage_in_bytes")
	before, err := ctlfile.ReadUint(usage)
	if err != nil {
		return 0, err
	}
	files, err := cgroupFiles(ctx, procRoot, dir, false)
	if err != nil {
		return 0, err
	}
	for _, tf := range files {
		if err := ctx.Err(); err != nil {
			return reclaimedSince(usage, before, err)
		}
		done, err := fadviseFile(tf, usage, before, n)
		if err != nil {
			return reclaimedSince(usage, before, err)
		}
		if done {
			break
		}
	}
	got, err := reclaimedSince(usage, before, nil)
	if err == nil && got == 0 {
		err = fmt.Errorf("%w: DONTNEED on %d open or mapped files", host.ErrNothingReclaimed, len(files))
	}
	return got, err
}

// fadviseFile drops tf's clean page cache a range at a time and reports
// whether usage has fallen by n from before. A file that vanished is
// skipped.
func fadviseFile(tf taskFile, usage string, before, n uint64) (bool, error) {
	f, err := tf.reopen()
	if err != nil {
		return false, nil
	}
	defer f.Close()
	fd := int(f.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, fmt.Errorf("stat %s: %w", tf.path, err)
	}
	if !cached(fd) {
		return false, nil
	}
	for off := int64(0); off < st.Size; off += ReclaimChunk {
		if err := unix.Fadvise(fd, off, ReclaimChunk, unix.FADV_DONTNEED); err != nil {
			return false, fmt.Errorf("fadvise %s: %w", tf.path, err)
		}
		u, err := ctlfile.ReadUint(usage)
		if err != nil {
			return false, err
		}
		if fell(before, u) >= n {
			return true, nil
		}
	}
	return false, nil
}

// cached reports whether the file has any page in the page cache, by
// cachestat(2) (mm/filemap.c, Linux 6.5+); without it every file counts.
func cached(fd int) bool {
	var cs unix.Cachestat_t
	err := unix.Cachestat(uint(fd), &unix.CachestatRange{}, &cs, 0)
	return err != nil || cs.Cache > 0
}
