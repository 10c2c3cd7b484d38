package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/memcgd/memcgd/config"
)

// globalFlags are the flags every subcommand shares.
type globalFlags struct {
	configPath string
	procRoot   string
}

func newRootCmd() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:   "memcgd",
		Short: "Per-cgroup dirty limits, background reclaim and writeback-first for Linux memory cgroups",
		Long: `memcgd brings three never-merged kernel patch sets to stock kernels, from userspace:
per-cgroup dirty limits (dirty_ratio, dirty_bytes, dirty_background_ratio,
dirty_background_bytes), per-cgroup background reclaim between watermarks
(min_free_kbytes, reclaim_wmarks), and reclaim that writes back the reclaiming
cgroup's own dirty files before flushing everything (writeback_first).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.configPath, "config", "", "YAML config file (default: the embedded policy, see README)")
	root.PersistentFlags().StringVar(&g.procRoot, "proc", "/proc", "procfs root, for tests")
	root.AddCommand(newRunCmd(g), newStatCmd(g), newSetCmd(g), newGetCmd(g), newVersionCmd(), newSimCmd())
	return root
}

// loadConfig reads --config, or the embedded default.
func (g *globalFlags) loadConfig() (*config.Config, error) {
	c, _, err := g.readConfig()
	return c, err
}

// readConfig reads --config, or the embedded default, and returns the
// file's bytes too (nil for the default): a watch of the file compares
// against what was loaded.
func (g *globalFlags) readConfig() (*config.Config, []byte, error) {
	if g.configPath == "" {
		return config.Default(), nil, nil
	}
	b, err := os.ReadFile(g.configPath)
	if err != nil {
		return nil, nil, fmt.Errorf("read config: %w", err)
	}
	c, err := config.Parse(b)
	if err != nil {
		return nil, b, fmt.Errorf("%s: %w", g.configPath, err)
	}
	return c, b, nil
}

// requireRoot fails with a one-line reason unless memcgd runs as root.
func requireRoot(what string) error {
	if euid := os.Geteuid(); euid != 0 {
		return fmt.Errorf("%s must run as root (running as uid %d): it reads and writes every managed cgroup's control files", what, euid)
	}
	return nil
}
