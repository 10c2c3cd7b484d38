package main

import (
	"fmt"

	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/host"
)

// loadConfigIn reads the config file at path, or the embedded default,
// and checks its managed subtree against l's memory hierarchy, resolving
// manage.under auto (config.ResolveUnder): a daemon on a subtree that does
// not exist would idle as if all were well, so start and reload refuse it.
func loadConfigIn(path string, l layout.Layout) (*config.Config, error) {
	c, _, err := readConfigIn(path, l)
	return c, err
}

// readConfigIn is loadConfigIn that returns the file's bytes too, as
// readConfig does.
func readConfigIn(path string, l layout.Layout) (*config.Config, []byte, error) {
	cfg, b, err := readConfig(path)
	if err != nil {
		return nil, b, err
	}
	err = cfg.ResolveUnder(func(cg host.Cgroup) bool {
		_, ok := layout.ExistingDir(l.Memory.Dir(cg))
		return ok
	})
	if err != nil {
		if path != "" {
			return nil, b, fmt.Errorf("%s: %w", path, err)
		}
		return nil, b, err
	}
	return cfg, b, nil
}
