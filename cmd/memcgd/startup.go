package main

import (
	"fmt"

	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/host"
)

// loadConfigIn reads --config, or the embedded default, and checks its
// managed subtree against l's memory hierarchy, resolving manage.under
// auto (config.ResolveUnder): a daemon on a subtree that does not exist
// would idle as if all were well, so start and reload refuse it.
func (g *globalFlags) loadConfigIn(l layout.Layout) (*config.Config, error) {
	cfg, err := g.loadConfig()
	if err != nil {
		return nil, err
	}
	err = cfg.ResolveUnder(func(cg host.Cgroup) bool {
		_, ok := layout.ExistingDir(l.Memory.Dir(cg))
		return ok
	})
	if err != nil {
		if g.configPath != "" {
			return nil, fmt.Errorf("%s: %w", g.configPath, err)
		}
		return nil, err
	}
	return cfg, nil
}
