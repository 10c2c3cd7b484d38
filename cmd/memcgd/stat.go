package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/memcgd/memcgd/cgroupfs"
	"github.com/memcgd/memcgd/control"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/overrides"
	"github.com/memcgd/memcgd/resolve"
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
reclaim_overshoot_bytes (the free space past high_wmark at the end of each
run, summed), writeout_targeted, writeout_flush (and their _bytes) and
throttle_pauses, throttle_paused_us; then writeout_flush_refused (full flushes the host
declined: rate-limited or nothing to flush, not failures), throttle_available
(false when the cgroup holds memcgd or no freezer reaches it), exempt (true
when it holds memcgd) and dirty_tracker (true when the eBPF dirty tracker
wakes the daemon, false when it polls: the fallback); a cgroup not throttled ends with
throttle_unavailable and the reason. Otherwise cgroupfs is read directly,
with the config's knobs and the runtime overrides memcgd set persisted
(--overrides) over them.
Either way the answer is printed cgroup by cgroup as it is read.

Flags (writeback_first, throttle_available, exempt, dirty_tracker) print as
true or false, as memcgd get prints writeback_first; a limit of none prints
as max. With --json, sizes are numbers of bytes, flags booleans, and null
stands for n/a and for no limit (docs/stat.md).

With no CGROUP, every cgroup of the managed subtree (config manage.under) is
listed. CGROUP is a hierarchy path as in /proc/PID/cgroup, or a directory in
cgroupfs.`

func newStatCmd() *cobra.Command {
	var asJSON bool
	var socket, overridesPath, procRoot, configPath string
	cmd := &cobra.Command{
		Use:   "stat [CGROUP]",
		Short: "Print per-cgroup dirty, reclaim and writeback statistics",
		Long:  statHelp,
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := hostLayout(procRoot, nil)
			if err != nil {
				return err
			}
			var one host.Cgroup
			if len(args) == 1 {
				if one, err = l.Resolve(args[0]); err != nil {
					return err
				}
			}
			bw := bufio.NewWriterSize(cmd.OutOrStdout(), 64<<10)
			out := newReportWriter(bw, asJSON)
			if c, err := control.Dial(socket); err == nil {
				defer c.Close()
				err := c.StatEach(cmd.Context(), one, func(r control.Report) error { return out.write(report(r)) })
				if err != nil {
					if one == "" {
						return fmt.Errorf("stat: %w", err)
					}
					return fmt.Errorf("stat %s: %w", one, err)
				}
				return errors.Join(out.close(), bw.Flush())
			}

			if err := requireRoot("memcgd stat"); err != nil {
				return err
			}
			cfg, err := loadConfigIn(configPath, l)
			if err != nil {
				return err
			}
			// The daemon's runtime overrides are in force for a cgroup
			// whether or not the daemon runs now: print the same.
			ov, err := overrides.Load(overridesPath, overrides.DirInode(l.Memory.Dir))
			if err != nil {
				return err
			}
			fs := cgroupfs.NewFS(l, procRoot, cfg.Under, nil)
			defer fs.Close()
			var cgs []host.Cgroup
			if one != "" {
				cgs = []host.Cgroup{one}
			} else if cgs, err = fs.Cgroups(cmd.Context()); err != nil {
				return err
			}
			n, errs := collect(cmd.Context(), fs, func(cg host.Cgroup) memcg.Knobs { return resolve.Knobs(cfg, ov, cg) }, cgs, out.write)
			if err := errors.Join(out.close(), bw.Flush()); err != nil {
				return err
			}
			if len(args) == 1 && n == 0 && errs == nil {
				return fmt.Errorf("%s vanished while it was read", cgs[0])
			}
			return errs
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: a list of {cgroup, stats}, sizes in bytes, yes/no as booleans, null for n/a and for no limit")
	cmd.Flags().StringVar(&socket, "socket", control.DefaultSocket, "the daemon's control socket, a `PATH`; when nothing answers there, cgroupfs is read directly")
	cmd.Flags().StringVar(&overridesPath, "overrides", overrides.DefaultPath, "the `FILE` of the overrides memcgd set persisted, applied when cgroupfs is read directly")
	addConfigFlag(cmd, &configPath)
	addProcFlag(cmd, &procRoot)
	return cmd
}

// report is one cgroup's listing.
type report struct {
	Cgroup host.Cgroup
	Fields []memcg.Field
	// Throttle says why the daemon does not throttle the cgroup; only the
	// daemon knows (control.Report.Throttle).
	Throttle string
}

// collect observes each cgroup and its ancestors and passes each report to
// emit as soon as it is built, holding only the readings of the current
// path from the root (resolve.PathCache) over cgs in walk order. A cgroup
// that vanishes meanwhile is skipped; any other failure is returned after
// the rest. It returns how many reports it emitted.
func collect(ctx context.Context, h host.Host, knobs func(host.Cgroup) memcg.Knobs, cgs []host.Cgroup, emit func(report) error) (int, error) {
	cache := resolve.NewPathCache(h.Observe)
	var errs []error
	n := 0
	for _, cg := range cgs {
		s, e, err := resolve.Resolve(ctx, cg, cache.Observe, knobs)
		if err != nil {
			if !errors.Is(err, host.ErrVanished) {
				errs = append(errs, err)
			}
			continue
		}
		if err := emit(report{Cgroup: cg, Fields: memcg.Report(s, e)}); err != nil {
			return n, err
		}
		n++
	}
	return n, errors.Join(errs...)
}

// reportWriter prints reports one at a time, as they come.
type reportWriter struct {
	w    io.Writer
	json bool
	n    int
}

func newReportWriter(w io.Writer, asJSON bool) *reportWriter {
	return &reportWriter{w: w, json: asJSON}
}

// write prints one report: in text, memory.stat style, a blank line
// between cgroups; in JSON, one element of the list, printed as
// json.Encoder with a two-space indent prints the whole list.
func (rw *reportWriter) write(r report) error {
	defer func() { rw.n++ }()
	if !rw.json {
		if rw.n > 0 {
			fmt.Fprintln(rw.w)
		}
		fmt.Fprintf(rw.w, "cgroup %s\n", r.Cgroup)
		for _, f := range r.Fields {
			if _, err := fmt.Fprintf(rw.w, "%s %s\n", f.Name, f.Text()); err != nil {
				return err
			}
		}
		if r.Throttle != "" {
			// A name and a value like the rest; the value is the
			// reason, on one line whatever the error said.
			_, err := fmt.Fprintf(rw.w, "throttle_unavailable %s\n", strings.Join(strings.Fields(r.Throttle), " "))
			return err
		}
		return nil
	}
	type entry struct {
		Cgroup   host.Cgroup    `json:"cgroup"`
		Stats    map[string]any `json:"stats"`
		Throttle string         `json:"throttle_unavailable,omitempty"`
	}
	e := entry{Cgroup: r.Cgroup, Stats: make(map[string]any, len(r.Fields)), Throttle: r.Throttle}
	for _, f := range r.Fields {
		e.Stats[f.Name] = f.JSON()
	}
	b, err := json.MarshalIndent(e, "  ", "  ")
	if err != nil {
		return err
	}
	sep := ",\n  "
	if rw.n == 0 {
		sep = "[\n  "
	}
	_, err = fmt.Fprintf(rw.w, "%s%s", sep, b)
	return err
}

// close ends the output: the JSON list's closing bracket.
func (rw *reportWriter) close() error {
	if !rw.json {
		return nil
	}
	end := "\n]\n"
	if rw.n == 0 {
		end = "[]\n"
	}
	_, err := io.WriteString(rw.w, end)
	return err
}
