package act

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"

	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/format"
	"github.com/memcgd/memcgd/cgroupfs/journal"
	"github.com/memcgd/memcgd/host"
	"golang.org/x/sys/unix"
)

// squeezeV1 reclaims by lowering v1's memory.limit_in_bytes below usage and
// putting it back, in steps of at most ReclaimChunk, never aiming below
// usage-at-start minus n. It returns the fall in memory.usage_in_bytes.
//
// A step does not halve what is left as memory.reclaim's do (reclaimStep):
// the kernel stops its reclaim once usage fits the lowered limit,
// checking after every SWAP_CLUSTER_MAX pages (mm/memcontrol-v1.c
// mem_cgroup_resize_max), so a step ends within a batch (and a folio) of
// its target anyway, and every step is a window in which a charge of the
// cgroup's tasks meets the lowered limit (a failed charge, reclaim in the
// task): more steps, more of them.
//
// Writing a limit below usage makes the writer reclaim
// (mm/memcontrol-v1.c mem_cgroup_resize_max): it drains the per-cpu charge
// stock, then calls try_to_free_mem_cgroup_pages until usage fits and only
// then sets the limit (mm/page_counter.c page_counter_set_max), or fails
// with EBUSY, limit unchanged, once reclaim makes no progress. So the
// kernel picks the pages (its LRU order, the cgroup's whole page cache),
// the write fails rather than OOM-kill, and the lowered limit is in force
// only between the write's return and the restore that follows it at once.
// The original limit is recorded in j first (one record for all steps,
// through Journal.apply), so a crash in that window is undone by the next
// run's Recover; each step re-reads the limit and stops if another writer
// changed it. log gets one info line where the record is undone, the
// limit put back: what an operator sees of a squeeze, however many steps
// it took (a crash before it leaves the record, which the next start
// undoes and logs).
//
// Even that window can OOM-kill a task whose charge finds nothing to
// reclaim in it, so the squeeze works only on leaves, never on a cgroup in
// OOM or with the OOM killer disabled, and each step is at most a quarter
// of the cgroup's clean file pages and leaves squeezeReserve of them
// (squeezable, squeezeRoom); otherwise it returns host.ErrNothingReclaimed.
//
// The other way, posix_fadvise(POSIX_FADV_DONTNEED) on the files the
// cgroup's tasks have open, reaches only files still open, drops pages
// whatever their age, and cannot drop dirty ones; reclaim_v1_test.go
// measures it against the squeeze (docs/actuators.md).
func squeezeV1(ctx context.Context, dir string, n, observed uint64, j *journal.Journal, log *slog.Logger) (got uint64, err error) {
	if j == nil {
		return 0, errors.New("a v1 limit squeeze needs a journal; got nil")
	}
	if err := squeezable(dir); err != nil {
		return 0, err
	}
	usage := filepath.Join(dir, "memory.usage_in_bytes")
	limit := filepath.Join(dir, journal.FileLimitV1)
	before, err := ctlfile.ReadUint(usage)
	if err != nil {
		return 0, err
	}
	if n = remaining(n, observed, before); n == 0 {
		return 0, nil
	}
	// The squeeze's steps read memory.stat into one buffer (squeezeRoom).
	var buf []byte
	floor := alignUp(before-min(n, before), ctlfile.PageSize)
	lowest := strconv.FormatUint(floor, 10)

	// One journal record for the whole squeeze: every step writes a limit
	// at or above floor and then the original back.
	var a *journal.Applied
	var busy bool
	var refused error
	// asked bounds the loop: a cgroup whose tasks charge as fast as the
	// steps reclaim would otherwise keep usage above floor for ever.
	var asked uint64
	for asked < n {
		if err = ctx.Err(); err != nil {
			break
		}
		var u uint64
		if u, err = ctlfile.ReadUint(usage); err != nil {
			break
		}
		if u <= floor {
			break
		}
		var room uint64
		if room, refused, err = squeezeRoom(dir, &buf); err != nil || refused != nil {
			break
		}
		step := min(u-floor, ReclaimChunk, room, n-asked) &^ (ctlfile.PageSize - 1)
		if step == 0 {
			refused = fmt.Errorf("%s: clean file pages are within the %d MiB a squeeze always leaves", dir, squeezeReserve>>20)
			break
		}
		target := strconv.FormatUint(u-step, 10)
		if a == nil {
			a, err = j.Apply(ctx, limit, target, lowest, nil)
		} else {
			err = a.Set(ctx, target)
		}
		if errors.Is(err, unix.EBUSY) {
			busy, err = true, nil
			break
		}
		if err != nil {
			break
		}
		asked += step
		if err = a.Set(ctx, a.Original()); err != nil {
			break
		}
	}
	if a != nil {
		if uerr := a.Undo(); uerr != nil {
			err = errors.Join(err, fmt.Errorf("restore limit %s: %w", a.Original(), uerr))
		} else {
			log.Info("v1 limit lowered and restored", "file", limit, "limit", a.Original(), "floor", lowest, "asked_bytes", asked)
		}
	}
	if asked == 0 && err == nil && (busy || refused != nil) {
		// No step was taken: whatever usage did meanwhile (a charging
		// task at the limit makes the kernel reclaim on its own) is not
		// the squeeze's.
		got = 0
	} else {
		got, err = reclaimedSince(usage, before, err)
	}
	if err == nil && got == 0 {
		switch {
		case busy:
			err = fmt.Errorf("%w: %s answered EBUSY", host.ErrNothingReclaimed, limit)
		case refused != nil:
			err = fmt.Errorf("%w: %w", host.ErrNothingReclaimed, refused)
		}
	}
	return got, err
}

// squeezeMargin is how many times the step the reclaimable file pages must
// be. A lowered limit leaves no headroom: until the original is back, any
// charge of the cgroup's tasks must reclaim in the cgroup, and one that
// finds nothing (anonymous memory without swap, mlocked pages) invokes the
// OOM killer (mm/memcontrol.c try_charge_memcg, mem_cgroup_oom). With
// reclaimable file pages at least this many times the step before it,
// at least three steps' worth remain for such charges after the step's own
// reclaim.
const squeezeMargin = 4

// squeezeReserve is how much reclaimable file cache a squeeze always
// leaves, however small the step: the charges of a window are not bounded
// by the step but by how fast the tasks charge, up to a batch of
// MEMCG_CHARGE_BATCH (64) pages per CPU at a time (mm/memcontrol.c
// consume_stock, refill_stock).
const squeezeReserve = 8 << 20

// squeezable checks the conditions a v1 squeeze needs for its whole run
// (issue 9, defect 9): cg must be a leaf. A parent's limit covers its
// children (use_hierarchy), whose charges would hit the lowered limit
// with no regard to what each of them can reclaim.
func squeezable(dir string) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return fmt.Errorf("stat %s: %w", dir, ctlfile.Vanished(err))
	}
	// A kernfs directory's link count is 2 plus its subdirectories
	// (fs/kernfs/inode.c kernfs_refresh_inode).
	if st.Nlink != 2 {
		return fmt.Errorf("%w: %s has child cgroups; only leaves are squeezed", host.ErrNothingReclaimed, dir)
	}
	return nil
}

// squeezeRoom returns the largest step a squeeze may take now: the
// cgroup's reclaimable file pages (inactive_file + active_file, less dirty
// and writeback pages, which reclaim cannot drop at once) divided by
// squeezeMargin, and at most what leaves squeezeReserve of them. It refuses (refused) a cgroup in OOM or with the OOM
// killer disabled, whose tasks a lowered limit would hang. It reads into
// *buf, made at its first call.
func squeezeRoom(dir string, buf *[]byte) (room uint64, refused, err error) {
	if len(*buf) == 0 {
		*buf = make([]byte, 1024) // v1 memory.stat: under 1 KiB on 6.18, grown if longer
	}
	p := filepath.Join(dir, "memory.oom_control")
	b, err := ctlfile.ReadInto(p, buf)
	if err != nil {
		return 0, nil, err
	}
	var oc format.MemoryOOMControl
	if err := format.ParseMemoryOOMControl(b, &oc); err != nil {
		return 0, nil, fmt.Errorf("read %s: %w", p, err)
	}
	switch {
	case oc.UnderOOM != 0:
		return 0, fmt.Errorf("%s: under_oom", dir), nil
	case oc.OOMKillDisable != 0:
		return 0, fmt.Errorf("%s: oom_kill_disable", dir), nil
	}
	p = filepath.Join(dir, "memory.stat")
	if b, err = ctlfile.ReadInto(p, buf); err != nil {
		return 0, nil, err
	}
	var st format.MemoryStatV1
	if err := format.ParseMemoryStatV1(b, &st); err != nil {
		return 0, nil, fmt.Errorf("read %s: %w", p, err)
	}
	c := st.Local // a leaf: its own pages are all its pages
	file := c.InactiveFile + c.ActiveFile
	file -= min(file, c.Dirty+c.Writeback)
	return min(file/squeezeMargin, file-min(file, squeezeReserve)), nil, nil
}

func alignUp(v, a uint64) uint64 { return (v + a - 1) &^ (a - 1) }
