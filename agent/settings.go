package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/state"
)

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
func (a *Agent) Get(cg host.Cgroup) (state.Settings, error) {
	chain, knobs, err := a.ancestry(context.Background(), cg)
	if err != nil {
		return state.Settings{}, fmt.Errorf("get %s: %w", cg, err)
	}
	var ov map[string]string
	if a.opts.Overrides != nil {
		ov = a.opts.Overrides.Get(cg)
	}
	return state.NewSettings(cg, memcg.Resolve(chain, knobs), ov), nil
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
