package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/memcgd/memcgd/agent"
	"github.com/memcgd/memcgd/cgroupfs"
	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/control"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

const statHelp = `Print, per memory cgroup, in memory.stat style: usage, limit, file, anon,
dirty and writeback (bytes); the knobs in force and the thresholds they give
(dirty_background_thresh and dirty_thresh in bytes, never above an ancestor's;
min_free_kbytes and the reclaim watermarks low_wmark and high_wmark in bytes of
free space under the limit); and seed 001's counters where the kernel has an
equivalent, n/a where it has none:

  kswapd_pgscan, kswapd_steal   v2 pgscan_kswapd, pgsteal_kswapd (pages)
  pg_scan, pg_pgsteal           v2 pgscan_direct, pgsteal_direct (pages):
                                direct (limit) reclaim in the cgroup
  pgrefill                      v2 pgrefill (pages)
  allocstall                    v2 memory.events "max", v1 memory.failcnt:
                                times a charge hit the limit and reclaimed
  pgpgin, pgpgout               v1 only (pages)
  memory_pressure_*_total_us    PSI of the cgroup (hybrid hosts: of the
                                unified-hierarchy cgroup at the same path)

When the daemon answers on --socket, its own figures are printed, the same
the metrics endpoint exports: kswapd_steal is then the daemon's background
reclaim (pages), followed by pgoutrun (its reclaim runs), reclaimed_bytes,
writeout_targeted, writeout_flush (and their _bytes) and throttle_pauses,
throttle_paused_us. Otherwise cgroupfs is read directly.

With no CGROUP, every cgroup of the managed subtree (config manage.under) is
listed. CGROUP is a hierarchy path as in /proc/PID/cgroup, or a directory in
cgroupfs.`

func newStatCmd(g *globalFlags) *cobra.Command {
	var asJSON bool
	var socket string
	cmd := &cobra.Command{
		Use:   "stat [CGROUP]",
		Short: "Print per-cgroup dirty, reclaim and writeback statistics",
		Long:  statHelp,
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			write := writeText
			if asJSON {
				write = writeJSON
			}
			l, err := cgroupfs.Discover(g.procRoot)
			if err != nil {
				return err
			}
			var one host.Cgroup
			if len(args) == 1 {
				if one, err = l.Resolve(args[0]); err != nil {
					return err
				}
			}
			if c, err := control.Dial(socket); err == nil {
				defer c.Close()
				reports, err := statFromDaemon(cmd.Context(), c, one)
				if err != nil {
					return err
				}
				return write(cmd.OutOrStdout(), reports)
			}

			if err := requireRoot("memcgd stat"); err != nil {
				return err
			}
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			fs := cgroupfs.NewFS(l, g.procRoot, cfg.Under, nil)
			var cgs []host.Cgroup
			if one != "" {
				cgs = []host.Cgroup{one}
			} else if cgs, err = fs.Cgroups(cmd.Context()); err != nil {
				return err
			}
			reports, errs := collect(cmd.Context(), fs, cfg, cgs)
			if len(args) == 1 && len(reports) == 0 && len(errs) == 0 {
				return fmt.Errorf("%s vanished while it was read", cgs[0])
			}
			if err := write(cmd.OutOrStdout(), reports); err != nil {
				return err
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: a list of {cgroup, stats} with null for n/a")
	cmd.Flags().StringVar(&socket, "socket", control.DefaultSocket, "the daemon's control socket; when nothing answers there, cgroupfs is read directly")
	return cmd
}

// statFromDaemon asks the running daemon for cg's report, or every managed
// cgroup's when cg is "".
func statFromDaemon(ctx context.Context, c *control.Client, cg host.Cgroup) ([]report, error) {
	rs, err := c.Stat(ctx, cg)
	if err != nil {
		if cg == "" {
			return nil, fmt.Errorf("stat: %w", err)
		}
		return nil, fmt.Errorf("stat %s: %w", cg, err)
	}
	out := make([]report, 0, len(rs))
	for _, r := range rs {
		out = append(out, report{Cgroup: r.Cgroup, Fields: r.Fields})
	}
	return out, nil
}

// report is one cgroup's listing.
type report struct {
	Cgroup host.Cgroup
	Fields []memcg.Field
}

// collect observes each cgroup and its ancestors (each once) and builds the
// reports; a cgroup that vanishes meanwhile is skipped, and any other
// failure is returned beside the reports that succeeded.
func collect(ctx context.Context, h host.Host, cfg *config.Config, cgs []host.Cgroup) ([]report, []error) {
	seen := map[host.Cgroup]memcg.Stat{}
	observe := func(cg host.Cgroup) (memcg.Stat, error) {
		if s, ok := seen[cg]; ok {
			return s, nil
		}
		s, err := h.Observe(ctx, cg)
		if err == nil {
			seen[cg] = s
		}
		return s, err
	}
	var out []report
	var errs []error
	for _, cg := range cgs {
		chain, knobs, err := ancestry(cg, cfg, observe)
		if err != nil {
			if !errors.Is(err, host.ErrVanished) {
				errs = append(errs, err)
			}
			continue
		}
		e := memcg.Resolve(chain, knobs)
		out = append(out, report{Cgroup: cg, Fields: memcg.Report(chain[len(chain)-1], e)})
	}
	return out, errs
}

// ancestry observes cg and its ancestors, root first, with their knobs.
func ancestry(cg host.Cgroup, cfg *config.Config, observe func(host.Cgroup) (memcg.Stat, error)) ([]memcg.Stat, []memcg.Knobs, error) {
	paths := agent.Ancestors(cg)
	chain := make([]memcg.Stat, len(paths))
	knobs := make([]memcg.Knobs, len(paths))
	for i, p := range paths {
		s, err := observe(p)
		if err != nil {
			return nil, nil, err
		}
		chain[i], knobs[i] = s, cfg.Knobs(p)
	}
	return chain, knobs, nil
}

func formatValue(f memcg.Field) string {
	switch {
	case !f.Known:
		return "n/a"
	case f.Value == memcg.NoLimit:
		return "max"
	}
	return strconv.FormatUint(f.Value, 10)
}

func writeText(w io.Writer, reports []report) error {
	for i, r := range reports {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "cgroup %s\n", r.Cgroup)
		for _, f := range r.Fields {
			if _, err := fmt.Fprintf(w, "%s %s\n", f.Name, formatValue(f)); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeJSON(w io.Writer, reports []report) error {
	type entry struct {
		Cgroup host.Cgroup        `json:"cgroup"`
		Stats  map[string]*uint64 `json:"stats"`
	}
	out := make([]entry, 0, len(reports))
	for _, r := range reports {
		e := entry{Cgroup: r.Cgroup, Stats: map[string]*uint64{}}
		for _, f := range r.Fields {
			if f.Known {
				v := f.Value
				e.Stats[f.Name] = &v
			} else {
				e.Stats[f.Name] = nil
			}
		}
		out = append(out, e)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
