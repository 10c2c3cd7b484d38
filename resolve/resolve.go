// Package resolve computes the settings in force for a cgroup: the
// config's defaults and matching rules, the runtime overrides over them,
// and the limits it inherits from its ancestors. The daemon and `memcgd
// stat` share it, so that both print the same thresholds.
package resolve

import (
	"context"
	"strings"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// Overrides are runtime knob settings over the config's
// (overrides.Overrides).
type Overrides interface {
	Apply(cg host.Cgroup, k memcg.Knobs) memcg.Knobs
}

// Knobs returns the knobs in force for cg: the config's defaults, its
// matching rules in order, then cg's runtime overrides (ov may be nil).
func Knobs(cfg *config.Config, ov Overrides, cg host.Cgroup) memcg.Knobs {
	k := cfg.Knobs(cg)
	if ov != nil {
		k = ov.Apply(cg, k)
	}
	return k
}

// Observer reads one cgroup's state.
type Observer func(ctx context.Context, cg host.Cgroup) (memcg.Stat, error)

// Resolve observes cg and its ancestors, root first, and returns cg's
// state and the settings in force for it: each level's knobs from knobs,
// thresholds never above an ancestor's (memcg.Resolve).
func Resolve(ctx context.Context, cg host.Cgroup, observe Observer, knobs func(host.Cgroup) memcg.Knobs) (memcg.Stat, memcg.Effective, error) {
	paths := host.Ancestors(cg)
	chain := make([]memcg.Stat, len(paths))
	ks := make([]memcg.Knobs, len(paths))
	for i, p := range paths {
		s, err := observe(ctx, p)
		if err != nil {
			return memcg.Stat{}, memcg.Effective{}, err
		}
		chain[i], ks[i] = s, knobs(p)
	}
	return chain[len(chain)-1], memcg.Resolve(chain, ks), nil
}

// PathCache is an Observer that keeps the readings of one path from the
// root: the last cgroup read and its ancestors. Over cgroups in depth-first
// order, parents first (layout.Walk's), each cgroup is read once, and it
// holds at most one reading per level rather than one per cgroup.
type PathCache struct {
	observe Observer
	path    []reading // root first; each an ancestor of the next
}

type reading struct {
	cg   host.Cgroup
	stat memcg.Stat
}

// NewPathCache returns a PathCache over observe.
func NewPathCache(observe Observer) *PathCache { return &PathCache{observe: observe} }

// Observe returns cg's reading, from the cache when cg is on the cached
// path.
func (c *PathCache) Observe(ctx context.Context, cg host.Cgroup) (memcg.Stat, error) {
	for _, r := range c.path {
		if r.cg == cg {
			return r.stat, nil
		}
	}
	n := 0
	for n < len(c.path) && isAncestor(c.path[n].cg, cg) {
		n++
	}
	c.path = c.path[:n]
	s, err := c.observe(ctx, cg)
	if err != nil {
		return s, err
	}
	c.path = append(c.path, reading{cg, s})
	return s, nil
}

// isAncestor reports whether a is a proper ancestor of cg.
func isAncestor(a, cg host.Cgroup) bool {
	if a == "/" {
		return cg != "/"
	}
	return strings.HasPrefix(string(cg), string(a)+"/")
}
