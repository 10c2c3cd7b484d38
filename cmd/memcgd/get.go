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
		{Name: "dirty_background_thresh", Value: s.Dirty.Background, Known: true, Kind: memcg.KindBytes},
		{Name: "dirty_thresh", Value: s.Dirty.Limit, Known: true, Kind: memcg.KindBytes},
		{Name: "min_wmark", Value: s.Watermarks.Min, Known: true, Kind: memcg.KindBytes},
		{Name: "low_wmark", Value: s.Watermarks.Low, Known: true, Kind: memcg.KindBytes},
		{Name: "high_wmark", Value: s.Watermarks.High, Known: true, Kind: memcg.KindBytes},
	}
}

func writeSettings(w io.Writer, s control.GetResult) error {
	fmt.Fprintf(w, "cgroup %s\n", s.Cgroup)
	// Each knob in the text form set takes: writeback_first true or
	// false, as memcgd stat prints it.
	for _, name := range memcg.KnobNames() {
		mark := ""
		if _, ok := s.Overrides[name]; ok {
			mark = " (override)"
		}
		fmt.Fprintf(w, "%s %s%s\n", name, s.Knobs[name], mark)
	}
	for _, f := range settingsFields(s) {
		if _, err := fmt.Fprintf(w, "%s %s\n", f.Name, f.Text()); err != nil {
			return err
		}
	}
	return nil
}

// writeSettingsJSON prints s with each knob of the JSON type of what it
// holds (memcg.Knobs.Value): the same types as memcgd stat --json and the
// control socket.
func writeSettingsJSON(w io.Writer, s control.GetResult) error {
	out := struct {
		Cgroup    host.Cgroup    `json:"cgroup"`
		Knobs     map[string]any `json:"knobs"`
		Overrides map[string]any `json:"overrides"`
		Bytes     map[string]any `json:"bytes"`
	}{Cgroup: s.Cgroup, Knobs: typedKnobs(s.Knobs), Overrides: typedKnobs(s.Overrides), Bytes: map[string]any{}}
	for _, f := range settingsFields(s) {
		out.Bytes[f.Name] = f.JSON()
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// typedKnobs is knobs (text forms) with typed values; a value the daemon
// sent that memcg cannot read stays a string.
func typedKnobs(knobs map[string]string) map[string]any {
	out := make(map[string]any, len(knobs))
	for name, text := range knobs {
		v, err := memcg.KnobValue(name, text)
		if err != nil {
			v = text
		}
		out[name] = v
	}
	return out
}
