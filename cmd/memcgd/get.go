package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/memcgd/memcgd/control"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

const getHelp = `Print the settings the running daemon applies to one cgroup: every knob in
force, marked "(override)" where set at run time by memcgd set, then the
dirty thresholds (dirty_background_thresh, dirty_thresh: bytes of dirty plus
writeback, never above an ancestor's) and the reclaim watermarks (min_wmark,
low_wmark, high_wmark: bytes of free space under the limit, 0 when
background reclaim is off).

CGROUP is a hierarchy path as in /proc/PID/cgroup, or a directory in
cgroupfs.`

func newGetCmd() *cobra.Command {
	var socket, procRoot string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "get CGROUP",
		Short: "Print a cgroup's knobs, thresholds and watermarks in the running daemon",
		Long:  getHelp,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cg, err := resolveCgroup(procRoot, args[0])
			if err != nil {
				return err
			}
			c, err := control.Dial(socket)
			if err != nil {
				return err
			}
			defer c.Close()
			s, err := c.Get(cmd.Context(), cg)
			if err != nil {
				return fmt.Errorf("get %s: %w", cg, err)
			}
			if asJSON {
				return writeSettingsJSON(cmd.OutOrStdout(), s)
			}
			return writeSettings(cmd.OutOrStdout(), s)
		},
	}
	cmd.Flags().StringVar(&socket, "socket", control.DefaultSocket, "the daemon's control socket, a `PATH`")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: {cgroup, knobs, overrides, bytes: thresholds and watermarks}")
	addProcFlag(cmd, &procRoot)
	return cmd
}

// settingsFields are the thresholds and watermarks of s, in `memcgd stat`
// vocabulary.
func settingsFields(s control.GetResult) []memcg.Field {
	return []memcg.Field{
		{Name: "dirty_background_thresh", Value: s.Dirty.Background, Known: true},
		{Name: "dirty_thresh", Value: s.Dirty.Limit, Known: true},
		{Name: "min_wmark", Value: s.Watermarks.Min, Known: true},
		{Name: "low_wmark", Value: s.Watermarks.Low, Known: true},
		{Name: "high_wmark", Value: s.Watermarks.High, Known: true},
	}
}

func writeSettings(w io.Writer, s control.GetResult) error {
	fmt.Fprintf(w, "cgroup %s\n", s.Cgroup)
	for _, name := range memcg.KnobNames() {
		mark := ""
		if _, ok := s.Overrides[name]; ok {
			mark = " (override)"
		}
		fmt.Fprintf(w, "%s %s%s\n", name, s.Knobs[name], mark)
	}
	for _, f := range settingsFields(s) {
		if _, err := fmt.Fprintf(w, "%s %s\n", f.Name, formatValue(f)); err != nil {
			return err
		}
	}
	return nil
}

func writeSettingsJSON(w io.Writer, s control.GetResult) error {
	out := struct {
		Cgroup    host.Cgroup       `json:"cgroup"`
		Knobs     map[string]string `json:"knobs"`
		Overrides map[string]string `json:"overrides"`
		Bytes     map[string]uint64 `json:"bytes"`
	}{Cgroup: s.Cgroup, Knobs: s.Knobs, Overrides: s.Overrides, Bytes: map[string]uint64{}}
	for _, f := range settingsFields(s) {
		out.Bytes[f.Name] = f.Value
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
