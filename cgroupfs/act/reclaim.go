package act

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/journal"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
)

// ReclaimChunk is the most Reclaim asks of the kernel in one write. A write
// to memory.reclaim or memory.limit_in_bytes runs reclaim synchronously and
// cannot be cancelled, so smaller steps let a cancelled context stop the
// work within one step, and give the cgroup's own tasks a turn between
// steps.
const ReclaimChunk = 16 << 20

// Reclaim asks the kernel to reclaim up to n bytes from cg and returns how
// much its usage fell, which is less than the kernel reclaimed if the
// cgroup's tasks charged new pages meanwhile. A shortfall is not an error;
// a kernel that gives up having reclaimed nothing at all (v2 EAGAIN, v1
// EBUSY), and a cgroup Reclaim will not touch (v2: nothing reclaimable
// outside memory.min/memory.low protection, see protectedCap; v1: see
// squeezeV1), is host.ErrNothingReclaimed. The end of ctx stops it within
// one write, which it interrupts (ctlfile.WriteCtx).
//
// On cgroup v2 it writes memory.reclaim (mm/memcontrol.c, memory_reclaim).
// Cgroup v1 has no such file; Reclaim squeezes memory.limit_in_bytes
// instead, recorded in j so that a crash cannot leave the limit lowered
// (see squeezeV1 and docs/actuators.md for why not posix_fadvise); log
// receives one info line per squeeze, once the limit is restored (nil
// discards it). observed, if not 0, is the usage n was decided on
// (host.Host.Reclaim): usage that fell since counts toward n (remaining).
func Reclaim(ctx context.Context, l layout.Layout, cg host.Cgroup, n, observed uint64, j *journal.Journal, log *slog.Logger) (uint64, error) {
	dir := l.Memory.Dir(cg)
	if dir == "" {
		return 0, fmt.Errorf("reclaim %s: outside the mounted memory hierarchy %s", cg, l.Memory.Mount)
	}
	if n == 0 {
		return 0, nil
	}
	var (
		got uint64
		err error
	)
	if l.Memory.Version == layout.V2 {
		got, err = reclaimV2(ctx, dir, n, observed)
	} else {
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		got, err = squeezeV1(ctx, dir, n, observed, j, log.With("cgroup", cg))
	}
	if err != nil {
		return got, fmt.Errorf("reclaim %d bytes from %s: %w", n, cg, err)
	}
	return got, nil
}

// remaining is what is left of a request for n bytes below the usage
// observed when it was decided (0: not known), usage being before now: a
// fall since then has done part of it. Both kernels' reclaim at a limit
// run in the charging task too (mm/memcontrol.c, try_charge_memcg), and a
// request sized on an older reading would otherwise take its share again.
func remaining(n, observed, before uint64) uint64 {
	if observed == 0 {
		return n
	}
	return n - min(n, fell(observed, before))
}

// fell returns how far usage fell from before to after, zero if it rose.
func fell(before, after uint64) uint64 {
	if after >= before {
		return 0
	}
	return before - after
}

// swapClusterMax is the least one call of try_to_free_mem_cgroup_pages
// reclaims (mm/vmscan.c: nr_to_reclaim = max(nr_pages, SWAP_CLUSTER_MAX);
// SWAP_CLUSTER_MAX is 32 pages, include/linux/swap.h): the granularity of
// a reclaim's end (policy.ReclaimGranule).
const swapClusterMax = 32 * ctlfile.PageSize

// reclaimStep is what one write to memory.reclaim asks of the kernel, left bytes
// short of its target with budget bytes still to ask: half of left, or
// all of it once it is at most two of the kernel's least batches, in
// whole pages, at most ReclaimChunk and budget. Every step takes a batch
// at least and whole folios, and may take a batch more than it is asked
// (shrink_lruvec checks its target between batches); with the steps
// halving, the last is small and so is what the reclaim ends past its
// target: a step that asked for everything left would overshoot by as
// much as the kernel's reclaim of a large request does.
func reclaimStep(left, budget uint64) uint64 {
	step := left
	if left > 2*swapClusterMax {
		step = left / 2
	}
	step = alignUp(step, ctlfile.PageSize)
	return max(min(step, ReclaimChunk, budget), 1)
}
