package main

import (
	"context"
	"testing"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/experiments/internal/lab"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/resolve"
)

// The thresholds in force for the noisy writer's cgroup in each arm, as
// the daemon resolves them over its ancestors (resolve.Resolve): on a
// 24 GiB machine, the lab's subtree three levels down, the writer's cgroup
// limited to 8 GiB with 2 GiB of page cache. The default ratios of the
// machine's memory must not cap an ablation's thresholds.
func TestEachArmPutsTheThresholdsItNames(t *testing.T) {
	const gib = 1 << 30
	e := experiment{dirty: 64 << 20, limit: 8 * gib}
	root := host.Cgroup("/process_api/id/memcgd-exp-1")
	writer := host.Cgroup(string(root) + "/w-zero-1-arm")
	observe := func(_ context.Context, cg host.Cgroup) (memcg.Stat, error) {
		if cg == writer {
			return memcg.Stat{Limit: 8 * gib, Usage: 2 * gib, File: 2 * gib}, nil
		}
		return memcg.Stat{Limit: 24 * gib, Usage: 3 * gib, File: 2 * gib}, nil
	}
	for _, tc := range []struct {
		arm               lab.Arm
		limit, background uint64 // want
		reclaimOn         bool
	}{
		{arm: lab.Memcgd, limit: 64 << 20, background: 32 << 20, reclaimOn: true},
		{arm: lab.Fallback, limit: 64 << 20, background: 32 << 20, reclaimOn: true},
		{arm: slice0, limit: 64 << 20, background: 32 << 20, reclaimOn: true},
		{arm: noReclaim, limit: 64 << 20, background: 32 << 20},
		{arm: noThrottle, limit: unreachable, background: 32 << 20, reclaimOn: true},
		{arm: watchOnly, limit: unreachable, background: unreachable / 2},
	} {
		cfg, err := config.Parse([]byte(e.config(root, tc.arm)))
		if err != nil {
			t.Fatalf("%s: %v", tc.arm.Name, err)
		}
		_, eff, err := resolve.Resolve(context.Background(), writer, observe, func(cg host.Cgroup) memcg.Knobs { return cfg.Knobs(cg) })
		if err != nil {
			t.Fatal(err)
		}
		got := eff.Dirty
		if got.Limit != tc.limit || got.Background != tc.background {
			t.Errorf("%s: dirty_thresh %d, dirty_background_thresh %d; want %d, %d", tc.arm.Name, got.Limit, got.Background, tc.limit, tc.background)
		}
		if on := eff.Watermarks.Enabled(); on != tc.reclaimOn {
			t.Errorf("%s: background reclaim on %v, want %v", tc.arm.Name, on, tc.reclaimOn)
		}
	}
}
