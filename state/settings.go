package state

import (
	"maps"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// Settings are what `memcgd get` shows of one cgroup: every knob in force,
// the overrides among them, and the thresholds and watermarks they give.
type Settings struct {
	Cgroup host.Cgroup
	// Knobs holds every knob in force, in memcg.Knobs.Get's text form.
	Knobs map[string]string
	// Overrides are the knobs set at run time, a subset of Knobs' names.
	Overrides map[string]string
	// Dirty are the effective dirty thresholds in bytes, never above an
	// ancestor's.
	Dirty memcg.DirtyLimits
	// Watermarks are the reclaim watermarks in bytes of free space.
	Watermarks memcg.Watermarks
}

// NewSettings builds the Settings of cg from its effective settings and a
// copy of its overrides.
func NewSettings(cg host.Cgroup, e memcg.Effective, overrides map[string]string) Settings {
	s := Settings{
		Cgroup:     cg,
		Knobs:      map[string]string{},
		Overrides:  maps.Clone(overrides),
		Dirty:      e.Dirty,
		Watermarks: e.Watermarks,
	}
	if s.Overrides == nil {
		s.Overrides = map[string]string{}
	}
	for _, name := range memcg.KnobNames() {
		// Every name KnobNames returns is one Get knows.
		s.Knobs[name], _ = e.Knobs.Get(name)
	}
	return s
}
