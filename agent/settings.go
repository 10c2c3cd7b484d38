package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/resolve"
	"github.com/memcgd/memcgd/sched"
	"github.com/memcgd/memcgd/state"
)

// The methods below serve the control socket (package control's Backend):
// runtime overrides take effect at the cgroup's next step, which they
// trigger at once.

// Knobs returns the knobs in force for cg: config defaults, matching
// rules, then runtime overrides.
func (a *Agent) Knobs(cg host.Cgroup) memcg.Knobs {
	a.mu.Lock()
	cfg := a.cfg
	a.mu.Unlock()
	return resolve.Knobs(cfg, a.opts.Overrides, cg)
}

// Set overrides knobs of cg at run time, all or nothing, and persists
// them. It refuses a cgroup the daemon does not manage, and says why.
func (a *Agent) Set(cg host.Cgroup, knobs map[string]string) error {
	if err := a.managed(cg); err != nil {
		return err
	}
	if a.opts.Overrides == nil {
		return errors.New("this daemon keeps no overrides")
	}
	if err := a.opts.Overrides.Set(cg, knobs); err != nil {
		return err
	}
	a.kick(cg)
	return nil
}

// Get returns the settings in force for cg, observed now.
func (a *Agent) Get(cg host.Cgroup) (state.Settings, error) {
	_, eff, err := resolve.Resolve(context.Background(), cg, a.opts.Host.Observe, a.Knobs)
	if err != nil {
		return state.Settings{}, fmt.Errorf("get %s: %w", cg, err)
	}
	var ov map[string]string
	if a.opts.Overrides != nil {
		ov = a.opts.Overrides.Get(cg)
	}
	return state.NewSettings(cg, eff, ov), nil
}

// Reset drops cg's runtime overrides.
func (a *Agent) Reset(cg host.Cgroup) error {
	if a.opts.Overrides == nil {
		return nil
	}
	if err := a.opts.Overrides.Delete(cg); err != nil {
		return err
	}
	a.kick(cg)
	return nil
}

// managed returns why the daemon does not manage cg, or nil when it does.
func (a *Agent) managed(cg host.Cgroup) error {
	a.mu.Lock()
	st, known := a.status[cg]
	why := ""
	if !known {
		why = a.outsideLocked(cg)
	}
	a.mu.Unlock()
	switch {
	case known && st.Managed:
		return nil
	case known:
		return fmt.Errorf("cgroup %s is not managed by memcgd: %s", cg, st.Unmanaged)
	}
	if _, err := a.opts.Host.Observe(context.Background(), cg); errors.Is(err, host.ErrVanished) {
		return fmt.Errorf("cgroup %s does not exist", cg)
	}
	return fmt.Errorf("cgroup %s is not managed by memcgd: %s", cg, why)
}

// kick asks the loop to step cg soon.
func (a *Agent) kick(cg host.Cgroup) {
	a.request(func(core *sched.Core, now time.Time) { core.Kick(now, cg) })
}
