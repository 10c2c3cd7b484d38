package act

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/format"
	"github.com/memcgd/memcgd/host"
	"golang.org/x/sys/unix"
)

// reclaimV2 writes memory.reclaim in steps until memory.current has
// fallen n below its reading at the start, or the steps have asked for n
// in all, or the kernel returns EAGAIN, n capped by protectedCap; it
// returns the fall in memory.current.
//
// The kernel (mm/memcontrol.c memory_reclaim; mm/vmscan.c
// user_proactive_reclaim since 6.17) loops try_to_free_mem_cgroup_pages
// until the request is met and returns EAGAIN after 16 rounds without
// progress, having kept what it did reclaim. It may reclaim more than it
// is asked (Documentation/admin-guide/cgroup-v2.rst): every call takes at
// least SWAP_CLUSTER_MAX pages, and until 6.7 one call was handed the
// whole request, which a reclaim pass by priority can overshoot by as
// much again (commits 0388536ac291 and 287d5fedb377 later cut the calls
// into batches). So the steps halve (reclaimStep), memory.current read
// again between them: the fall ends within about a batch of n, whatever
// the kernel's batching. The write goes
// through ctlfile.WriteCtx's raw write(2), so that EAGAIN reaches this
// function, and ctx interrupts it.
func reclaimV2(ctx context.Context, dir string, n, observed uint64) (uint64, error) {
	current := filepath.Join(dir, "memory.current")
	file := filepath.Join(dir, "memory.reclaim")
	before, err := ctlfile.ReadUint(current)
	if err != nil {
		return 0, err
	}
	limit, err := protectedCap(dir)
	if err != nil {
		return 0, err
	}
	// Never the last batches outside protection: the pass that would have
	// to find them finds nothing, and is run again below memory.low.
	limit -= min(limit, protectionMargin)
	if limit < ctlfile.PageSize {
		return 0, fmt.Errorf("%w: %s: the memory outside memory.min/memory.low protection is not reclaimable file cache",
			host.ErrNothingReclaimed, dir)
	}
	n = min(remaining(n, observed, before), limit)
	if n == 0 {
		return 0, nil
	}
	target := before - min(n, before)
	usage := before
	var asked uint64
	var short bool
	for asked < n && usage > target && !short {
		if err := ctx.Err(); err != nil {
			return reclaimedSince(current, before, err)
		}
		chunk := reclaimStep(usage-target, n-asked)
		err := ctlfile.WriteCtx(ctx, file, strconv.FormatUint(chunk, 10))
		switch {
		case errors.Is(err, unix.EAGAIN):
			short = true
		case err != nil:
			return reclaimedSince(current, before, err)
		}
		asked += chunk
		prev := usage
		if usage, err = ctlfile.ReadUint(current); err != nil {
			return 0, err
		}
		if fell(prev, usage) < chunk/2 {
			// The step came short: what is reclaimable outside the
			// subtree's protection is spent, or the tasks charge as fast.
			// Another step would find nothing, and a pass that reclaims
			// nothing is run again with memory.low ignored
			// (mm/vmscan.c do_try_to_free_pages, memcg_low_reclaim).
			break
		}
	}
	got := fell(before, usage)
	if got == 0 && short {
		return 0, fmt.Errorf("%w: %s answered EAGAIN", host.ErrNothingReclaimed, file)
	}
	return got, nil
}

// protectionMargin is how much of what protectedCap allows memory.reclaim
// is never asked for: two of the kernel's least batches. A subtree with
// protected children gives its last unprotected pages reluctantly, and a
// reclaim pass that finds none is repeated with memory.low ignored
// (mm/vmscan.c do_try_to_free_pages, memcg_low_reclaim).
const protectionMargin = 2 * swapClusterMax

// reclaimedSince reads usage again and returns its fall from before, along
// with cause (the error that ended the reclaim, if any).
func reclaimedSince(usage string, before uint64, cause error) (uint64, error) {
	after, err := ctlfile.ReadUint(usage)
	if err != nil {
		return 0, errors.Join(cause, err)
	}
	return fell(before, after), cause
}

// protectionWalkMax bounds the cgroups protectedCap reads beneath one
// target; a larger subtree is not reclaimed (it may be a tenant's making).
const protectionWalkMax = 4096

// memNode is one cgroup of the subtree protectedCap walks.
type memNode struct {
	usage    uint64 // memory.current
	setting  uint64 // max(memory.min, memory.low)
	file     uint64 // active_file + inactive_file, with the descendants'
	children []*memNode
}

// protectedCap returns how much memory.reclaim may be asked of the cgroup
// at dir without reclaiming protected memory (issue 9, defect 13).
//
// memory.reclaim ignores the target's own memory.min and memory.low, and
// honours its descendants' only while something else is reclaimable: a
// pass that reclaims nothing is repeated with memory.low ignored
// (mm/vmscan.c do_try_to_free_pages, memcg_low_reclaim), which the kernel
// allows as a last resort before an OOM but which a proactive reclaimer
// must not cause. So the request is capped at the reclaimable file pages
// outside protection:
//
//   - a descendant's protection is its effective one, as the kernel
//     computes it with the target as the reclaim root (mm/memcontrol.c
//     mem_cgroup_calculate_protection, effective_protection): a child of
//     the target has its own max(memory.min, memory.low); a deeper cgroup
//     its own, min(usage, setting), scaled down by its parent's effective
//     protection over its siblings' claims when those exceed it. The
//     memory_recursiveprot mount option's sharing of unclaimed protection
//     is not modelled: without it the cap is lower, never higher;
//   - each cgroup in the subtree (the target included, with its own
//     setting) contributes at most usage minus its effective protection,
//     and at most the file pages of its own and its unprotected
//     descendants';
//   - anonymous memory counts as not reclaimable, as without swap: with
//     swap the cap is lower than it need be, never higher.
func protectedCap(dir string) (uint64, error) {
	budget := protectionWalkMax
	root, err := readMemNode(dir, &budget)
	if err != nil {
		return 0, err
	}
	if root == nil {
		return 0, fmt.Errorf("%w: %s/memory.current", host.ErrVanished, dir)
	}
	return available(root, min(root.usage, root.setting), true), nil
}

// available returns how much reclaim may take from n's subtree, n having
// effective protection ep; root reports whether n is the reclaim root,
// whose children's effective protection is their own setting.
func available(n *memNode, ep uint64, root bool) uint64 {
	ep = min(ep, n.usage)
	var claimed uint64 // the children's claims on n's protection
	for _, c := range n.children {
		claimed += min(c.usage, c.setting)
	}
	var fromChildren, childFile uint64
	for _, c := range n.children {
		cep := min(c.usage, c.setting)
		if !root && claimed > ep {
			cep = cep * ep / claimed
		}
		fromChildren += available(c, cep, false)
		childFile += c.file
	}
	own := n.file - min(n.file, childFile)
	return min(own+fromChildren, n.usage-ep)
}

// readMemNode reads the cgroup at dir and its descendants. A child
// without memory.current (the memory controller not enabled for it: its
// pages are charged to dir) is not a node of its own; one removed
// meanwhile is skipped. It returns nil if dir itself has gone.
func readMemNode(dir string, budget *int) (*memNode, error) {
	if *budget--; *budget < 0 {
		return nil, fmt.Errorf("%w: more than %d cgroups beneath the target; not reclaiming a subtree whose protection cannot be read whole",
			host.ErrNothingReclaimed, protectionWalkMax)
	}
	var n memNode
	var err error
	if n.usage, err = ctlfile.ReadUint(filepath.Join(dir, "memory.current")); err != nil {
		if errors.Is(err, host.ErrVanished) {
			return nil, nil
		}
		return nil, err
	}
	for _, f := range []string{"memory.min", "memory.low"} {
		v, err := ctlfile.ReadLimit(filepath.Join(dir, f))
		if errors.Is(err, host.ErrVanished) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		n.setting = max(n.setting, v)
	}
	p := filepath.Join(dir, "memory.stat")
	s, err := ctlfile.Read(p)
	if errors.Is(err, host.ErrVanished) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st format.MemoryStatV2
	if err := format.ParseMemoryStatV2([]byte(s), &st); err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	n.file = st.ActiveFile + st.InactiveFile
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		c, err := readMemNode(filepath.Join(dir, e.Name()), budget)
		if err != nil {
			return nil, err
		}
		if c != nil {
			n.children = append(n.children, c)
		}
	}
	return &n, nil
}
