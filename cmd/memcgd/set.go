package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/memcgd/memcgd/control"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

var setHelp = `Override knobs of one cgroup in the running daemon, all or nothing: a bad
name or value changes nothing. The overrides take effect at once, persist
across daemon restarts, and win over the config file's defaults and rules
until dropped with --reset. As with vm.dirty_*, setting a ratio drops its
bytes twin and the reverse.

Knobs:
` + knobTable() + `
CGROUP is a hierarchy path as in /proc/PID/cgroup, or a directory in
cgroupfs. Knob names and values are checked before the daemon is asked: a
wrong one is a usage error (exit status 2).`

func newSetCmd() *cobra.Command {
	var socket, procRoot string
	var reset bool
	cmd := &cobra.Command{
		Use:   "set CGROUP KNOB=VALUE... | set --reset CGROUP",
		Short: "Override a cgroup's knobs in the running daemon",
		Long:  setHelp,
		Example: `  memcgd set /kubepods/burstable/pod-db dirty_bytes=16M dirty_background_bytes=8M
  memcgd set /sys/fs/cgroup/memory/batch min_free_kbytes=0 writeback_first=false
  memcgd set --reset /kubepods/burstable/pod-db`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return errors.New("set: want CGROUP and at least one knob=value")
			case reset && len(args) > 1:
				return fmt.Errorf("set --reset: want CGROUP only, got %q too", args[1:])
			case !reset && len(args) == 1:
				return fmt.Errorf("set %s: want at least one knob=value after the cgroup, e.g. dirty_ratio=15", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			knobs, err := parsePairs(args[1:])
			if err != nil {
				return usage(err)
			}
			cg, err := resolveCgroup(procRoot, args[0])
			if err != nil {
				return err
			}
			c, err := control.Dial(socket)
			if err != nil {
				return err
			}
			defer c.Close()
			var s control.GetResult
			if reset {
				s, err = c.Reset(cmd.Context(), cg)
			} else {
				s, err = c.Set(cmd.Context(), cg, knobs)
			}
			if err != nil {
				return fmt.Errorf("set %s: %w", cg, err)
			}
			return writeSettings(cmd.OutOrStdout(), s)
		},
	}
	cmd.Flags().StringVar(&socket, "socket", control.DefaultSocket, "the daemon's control socket, a `PATH`")
	cmd.Flags().BoolVar(&reset, "reset", false, "drop the cgroup's overrides: the config's knobs apply again")
	addProcFlag(cmd, &procRoot)
	return cmd
}

// parsePairs reads knob=value arguments and checks them as the daemon
// will (memcg.ParsePatch), so that a wrong one is refused here, named by
// the argument given.
func parsePairs(args []string) (map[string]string, error) {
	knobs := make(map[string]string, len(args))
	given := make(map[string]string, len(args))
	for _, a := range args {
		name, value, ok := strings.Cut(a, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("argument %q: want knob=value, e.g. dirty_ratio=15; knobs are %s", a, strings.Join(memcg.KnobNames(), ", "))
		}
		if _, dup := knobs[name]; dup {
			return nil, fmt.Errorf("argument %q: %s given twice: allowed once", a, name)
		}
		knobs[name], given[name] = value, a
	}
	if _, err := memcg.ParsePatch(knobs); err != nil {
		var ke *memcg.KnobError
		var ue *memcg.UnknownKnobError
		switch {
		case errors.As(err, &ke):
			return nil, fmt.Errorf("argument %q: %w", given[ke.Knob], err)
		case errors.As(err, &ue):
			return nil, fmt.Errorf("argument %q: %w", given[ue.Knob], err)
		}
		return nil, err
	}
	return knobs, nil
}

// resolveCgroup reads a CGROUP argument: a hierarchy path or a directory
// in cgroupfs.
func resolveCgroup(procRoot, arg string) (host.Cgroup, error) {
	l, err := hostLayout(procRoot, nil)
	if err != nil {
		return "", err
	}
	return l.Resolve(arg)
}
