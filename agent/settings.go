package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// Settings are what `memcgd get` shows of one cgroup: every knob in force,
// the overrides among them, and the thresholds and watermarks they give.
// It lives here rather than in package control so that the agent can serve
// the control socket without importing it (control imports agent).
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

// The methods below serve the control socket (package control's Backend):
// runtime overrides take effect at the cgroup's next step, which they
// trigger at once.

// Set overrides knobs of cg at run time, all or nothing, and persists them.
func (a *Agent) Set(cg host.Cgroup, knobs map[string]string) error {
	if err := a.exists(cg); err != nil {
		return err
	}
	if a.opts.Overrides == nil {
		return errors.New("this daemon keeps no overrides")
	}
	if err := a.opts.Overrides.Set(cg, knobs); err != nil {
		return err
	}
	a.kickCgroup(cg)
	return nil
}

// Get returns the settings in force for cg, observed now.
func (a *Agent) Get(cg host.Cgroup) (Settings, error) {
	chain, knobs, err := a.ancestry(context.Background(), cg)
	if err != nil {
		return Settings{}, fmt.Errorf("get %s: %w", cg, err)
	}
	var ov map[string]string
	if a.opts.Overrides != nil {
		ov = a.opts.Overrides.Get(cg)
	}
	return NewSettings(cg, memcg.Resolve(chain, knobs), ov), nil
}

// Reset drops cg's runtime overrides.
func (a *Agent) Reset(cg host.Cgroup) error {
	if a.opts.Overrides == nil {
		return nil
	}
	if err := a.opts.Overrides.Delete(cg); err != nil {
		return err
	}
	a.kickCgroup(cg)
	return nil
}

// exists checks that cg is a cgroup of the host now.
func (a *Agent) exists(cg host.Cgroup) error {
	if _, err := a.opts.Host.Observe(context.Background(), cg); err != nil {
		if errors.Is(err, host.ErrVanished) {
			return fmt.Errorf("cgroup %s does not exist", cg)
		}
		return err
	}
	return nil
}

// kickCgroup asks the loop to step cg soon.
func (a *Agent) kickCgroup(cg host.Cgroup) {
	select {
	case a.kick <- cg:
	default:
		a.requestScan()
	}
}
