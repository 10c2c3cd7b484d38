package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/memcg"
)

// newRootCmd builds the command tree, writing to out and errOut (cobra's
// completion commands take their writer when they are added).
func newRootCmd(out, errOut io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "memcgd",
		Short: "Per-cgroup dirty limits, background reclaim and writeback-first for Linux memory cgroups",
		Long: `memcgd brings three never-merged kernel patch sets to stock kernels, from
userspace: per-cgroup dirty limits, per-cgroup background reclaim between
watermarks, and reclaim that writes back the reclaiming cgroup's own dirty
files before flushing everything.

` + knobsByPatchSet() + `
` + exitStatusHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	root.AddCommand(newRunCmd(), newStatCmd(), newTopCmd(), newSetCmd(), newGetCmd(), newVersionCmd(), newSimCmd(), newGendocsCmd())
	// Added now rather than by Execute, so that usageArgs below reaches
	// them too.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if !c.Runnable() && c.HasSubCommands() {
			// Otherwise cobra prints the help for any argument, an
			// unknown shell too, and exits 0.
			c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
		}
	}
	root.SetFlagErrorFunc(flagError)
	usageArgs(root)
	return root
}

// addProcFlag adds --proc, for the commands that read the host.
func addProcFlag(cmd *cobra.Command, procRoot *string) {
	cmd.Flags().StringVar(procRoot, "proc", "/proc", "procfs root `DIR`, for tests")
}

// addConfigFlag adds --config, for the commands that apply the policy.
func addConfigFlag(cmd *cobra.Command, path *string) {
	cmd.Flags().StringVar(path, "config", "", "YAML config `FILE` (default: the embedded policy, see README)")
}

// loadConfig reads the config file at path, or the embedded default when
// path is "".
func loadConfig(path string) (*config.Config, error) {
	c, _, err := readConfig(path)
	return c, err
}

// readConfig is loadConfig that returns the file's bytes too (nil for the
// default): a watch of the file compares against what was loaded.
func readConfig(path string) (*config.Config, []byte, error) {
	if path == "" {
		return config.Default(), nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read config: %w", err)
	}
	c, err := config.Parse(b)
	if err != nil {
		return nil, b, fmt.Errorf("%s: %w", path, err)
	}
	return c, b, nil
}

// knobsByPatchSet lists the knobs under the patch set each comes from,
// from memcg's table: the names memcgd set and the config accept.
func knobsByPatchSet() string {
	var b strings.Builder
	b.WriteString("Knobs, per cgroup (config defaults and rules, memcgd set), by patch set:\n")
	var sets []string
	names := map[string][]string{}
	for _, d := range memcg.KnobDocs() {
		if names[d.PatchSet] == nil {
			sets = append(sets, d.PatchSet)
		}
		names[d.PatchSet] = append(names[d.PatchSet], d.Name)
	}
	for _, s := range sets {
		for i, l := range wrap(s+": "+strings.Join(names[s], ", "), 76) {
			indent := "  "
			if i > 0 {
				indent = "    "
			}
			fmt.Fprintf(&b, "%s%s\n", indent, l)
		}
	}
	return b.String()
}

// knobTable lists each knob with the values it takes, for memcgd set.
func knobTable() string {
	var b strings.Builder
	width := 0
	for _, d := range memcg.KnobDocs() {
		width = max(width, len(d.Name))
	}
	for _, d := range memcg.KnobDocs() {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, d.Name, d.Values)
	}
	return b.String()
}

// requireRoot fails with a one-line reason unless memcgd runs as root.
func requireRoot(what string) error {
	if euid := os.Geteuid(); euid != 0 {
		return fmt.Errorf("%s must run as root (running as uid %d): it reads and writes every managed cgroup's control files", what, euid)
	}
	return nil
}
