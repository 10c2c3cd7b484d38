package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/memcgd/memcgd/cgroupfs"
	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/control"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/overrides"
	"github.com/memcgd/memcgd/policy"
	"github.com/memcgd/memcgd/resolve"
	"github.com/memcgd/memcgd/sched"
)

const statHelp = `Print, per memory cgroup, in memory.stat style: whether memcgd manages it
(managed true or false; if false, unmanaged and why: outside manage.under, or
no memory limit with manage.limited_only); with the daemon, what it is doing to
the cgroup now (state: idle, active, paced, throttled or frozen) and since when
(since, RFC 3339), and dry_run true when it runs dry (memcgd run --dry-run:
the state and counters are what it would have done); usage, limit, file,
anon, dirty and writeback (bytes); for a managed cgroup, the knobs in force
and the thresholds they give
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
run, summed), writeout_targeted, writeout_flush (and their _bytes),
writeout_targeted_yielded (targeted write-outs spaced for another task
syncing on their device: --write-out-yield),
throttle_pauses and throttle_paused_us (the throttle's freezes and their
time: with pacing, the backstop's), throttle_paces and throttle_paced_us
(pacing episodes of the dirtying tasks by CPU bandwidth, and their time),
throttle_pace_held_us (the time the paces' limits held those tasks, read
every 100 ms or so while paced), dirty_over_thresh_us and
dirty_over_thresh_quarter_us (the time dirty+writeback was over
dirty_thresh, and over 1.25 times it, as the daemon's looks saw it),
dirty_rate_bytes_per_second and write_bandwidth_bytes_per_second (the
throttle's estimates); then writeout_flush_refused (full flushes the host
declined: rate-limited or nothing to flush, not failures), throttle_available
(false when the cgroup holds memcgd or no freezer reaches it), exempt (true
when it holds memcgd) and dirty_tracker (true when the eBPF dirty tracker
wakes the daemon, false when it polls: the fallback); a cgroup not throttled ends with
throttle_unavailable and the reason. Otherwise cgroupfs is read directly, and
stat says so on stderr: the kernel's figures, whether the config (--config)
would manage each cgroup, and for those it would, the knobs it gives with the
runtime overrides memcgd set persisted (--overrides) over them.
Either way the answer is printed cgroup by cgroup as it is read.

Flags (writeback_first, throttle_available, exempt, dirty_tracker) print as
true or false, as memcgd get prints writeback_first; a limit of none prints
as max. With --json, each cgroup is {cgroup, managed, unmanaged, state, since,
dry_run, stats, throttle_unavailable}, each key present when it applies; in
stats, sizes are numbers of bytes, flags booleans, and null stands for n/a and
for no limit (docs/stat.md).

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
			c, err := control.Dial(socket)
			if err == nil {
				defer c.Close()
				err := c.StatEach(cmd.Context(), one, func(r control.Report) error { return out.write(report{Report: r, Daemon: true}) })
				if err != nil {
					if one == "" {
						return fmt.Errorf("stat: %w", err)
					}
					return fmt.Errorf("stat %s: %w", one, err)
				}
				return errors.Join(out.close(), bw.Flush())
			}
			noDaemon := err

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
			if os.Getenv("GOGC") == "" {
				// The listing's garbage dies young and its heap stays
				// small however many cgroups it lists: collect half as
				// often as the default, trading a few MiB for CPU
				// (docs/lab/2026-12-04-stat-without-daemon.md).
				debug.SetGCPercent(200)
			}
			fs, err := cgroupfs.NewFSOptions(l, procRoot, cfg.Under, nil, cgroupfs.FSOptions{ReadOnce: true})
			if err != nil {
				return err
			}
			defer fs.Close()
			walk := func(ctx context.Context, fn func(host.Cgroup) error) error {
				if one != "" {
					return fn(one)
				}
				return fs.WalkCgroups(fn)
			}
			// Said before the first report, or once nothing failed, so
			// that a failure before any cgroup is read is still one line.
			notice := sync.OnceFunc(func() {
				fmt.Fprintf(cmd.ErrOrStderr(), "memcgd stat: %v; reading cgroupfs directly: no daemon state or counters, "+
					"and the knobs are what --config would give\n", noDaemon)
			})
			emit := func(r report) error {
				notice()
				return out.write(r)
			}
			n, errs := collect(cmd.Context(), fs, cfg, func(cg host.Cgroup) memcg.Knobs { return resolve.Knobs(cfg, ov, cg) }, walk, emit)
			if errs == nil {
				notice()
			}
			if err := errors.Join(out.close(), bw.Flush()); err != nil {
				return err
			}
			if one != "" && n == 0 && errs == nil {
				return fmt.Errorf("%s vanished while it was read", one)
			}
			return errs
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: a list of {cgroup, managed, unmanaged, state, since, dry_run, stats, throttle_unavailable}; in stats sizes in bytes, yes/no as booleans, null for n/a and for no limit")
	cmd.Flags().StringVar(&socket, "socket", control.DefaultSocket, "the daemon's control socket, a `PATH`; when nothing answers there, cgroupfs is read directly")
	cmd.Flags().StringVar(&overridesPath, "overrides", overrides.DefaultPath, "the `FILE` of the overrides memcgd set persisted, applied when cgroupfs is read directly")
	addConfigFlag(cmd, &configPath)
	addProcFlag(cmd, &procRoot)
	return cmd
}

// report is one cgroup's listing: the daemon's (control.Report), or one
// read from cgroupfs without it (Daemon false: Throttle, State, Since and
// DryRun unknown).
type report struct {
	control.Report
	Daemon bool
}

// collect observes each cgroup that walk finds, and its ancestors, and
// passes each report to emit as soon as it is built, holding only the
// readings of the current path from the root (resolve.PathCache) over the
// cgroups in walk order, and those read ahead of it (statReadAhead
// batches), while walk goes on in its own goroutine. Each report says
// whether cfg would manage the cgroup (managedBy). A cgroup that vanishes
// meanwhile is skipped; any other failure, the walk's included, is
// returned after the rest. It returns how many reports it emitted.
func collect(ctx context.Context, h host.Host, cfg *config.Config, knobs func(host.Cgroup) memcg.Knobs,
	walk func(context.Context, func(host.Cgroup) error) error, emit func(report) error) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	list := make(chan host.Cgroup, statReadBatch)
	walked := make(chan struct{})
	var walkErr error
	go func() {
		defer close(walked)
		defer close(list)
		walkErr = walk(ctx, func(cg host.Cgroup) error {
			select {
			case list <- cg:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	ahead := newReadAhead(ctx, h.Observe, list, runtime.GOMAXPROCS(0), statReadBatch, statReadAhead)
	defer func() {
		cancel()
		ahead.Stop()
		<-walked
	}()
	cache := resolve.NewPathCache(ahead.Observe(h.Observe))
	var errs []error
	n := 0
	for {
		cg, ok := ahead.Next()
		if !ok {
			break
		}
		s, e, err := resolve.Resolve(ctx, cg, cache.Observe, knobs)
		var why string
		if err == nil {
			why, err = managedBy(ctx, cfg, cg, cache.Observe)
		}
		if err != nil {
			if !errors.Is(err, host.ErrVanished) {
				errs = append(errs, err)
			}
			continue
		}
		r := control.Report{Cgroup: cg, Fields: memcg.Report(s, e), Managed: why == "", Unmanaged: why}
		if err := emit(report{Report: r}); err != nil {
			return n, err
		}
		n++
	}
	// The list ended: the walk has returned, or ctx ended.
	<-walked
	if walkErr != nil {
		errs = append([]error{walkErr}, errs...)
	}
	return n, errors.Join(errs...)
}

// statReadBatch and statReadAhead are how collect reads ahead of the
// cgroup it reports: in batches of statReadBatch cgroups, at most
// statReadAhead batches ahead. Enough to keep every CPU reading while it
// formats, few enough that the readings held stay small beside the 10,000
// it may list.
const (
	statReadBatch = 16
	statReadAhead = 4
)

// managedBy returns why cfg would not manage cg, "" when it would: outside
// manage.under, or with limited_only and no limit on cg or an ancestor
// below the root (policy.Manages, as the daemon decides). observe reads
// cg's ancestors, from a cache that holds them.
func managedBy(ctx context.Context, cfg *config.Config, cg host.Cgroup, observe resolve.Observer) (string, error) {
	paths := host.Ancestors(cg)
	if !slices.Contains(paths, cfg.Under) {
		return fmt.Sprintf("it is outside manage.under (%s)", cfg.Under), nil
	}
	chain := make([]memcg.Stat, len(paths))
	for i, p := range paths {
		s, err := observe(ctx, p)
		if err != nil {
			return "", err
		}
		chain[i] = s
	}
	if !policy.Manages(cfg.LimitedOnly, chain) {
		return sched.NotLimited, nil
	}
	return "", nil
}

// policyField reports whether the memcg.Report field name is one the
// config gives (a knob, a threshold, a watermark): in force only where
// memcgd manages the cgroup, so not printed for one it does not.
func policyField(name string) bool {
	switch name {
	case "dirty_background_thresh", "dirty_thresh", "low_wmark", "high_wmark":
		return true
	}
	return slices.Contains(memcg.KnobNames(), name)
}

// shown are the fields of r to print: all of them for a managed cgroup,
// only the kernel's and the daemon's counters for another.
func (r report) shown() []memcg.Field {
	if r.Managed {
		return r.Fields
	}
	out := make([]memcg.Field, 0, len(r.Fields))
	for _, f := range r.Fields {
		if !policyField(f.Name) {
			out = append(out, f)
		}
	}
	return out
}

// state is r's state, nil when unknown: without the daemon, or for a
// cgroup it does not manage or has not stepped yet.
func (r report) state() *string {
	if !r.Daemon || !r.Managed || r.State == "" {
		return nil
	}
	return &r.State
}

// since is when r's state began, as stat prints it, "" with no state.
func (r report) since() string {
	if r.state() == nil || r.Since.IsZero() {
		return ""
	}
	return r.Since.UTC().Format(time.RFC3339Nano)
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
		fmt.Fprintf(rw.w, "cgroup %s\nmanaged %t\n", r.Cgroup, r.Managed)
		if r.Unmanaged != "" {
			fmt.Fprintf(rw.w, "unmanaged %s\n", oneLine(r.Unmanaged))
		}
		if st := r.state(); st != nil {
			fmt.Fprintf(rw.w, "state %s\n", *st)
			if since := r.since(); since != "" {
				fmt.Fprintf(rw.w, "since %s\n", since)
			}
		}
		if r.DryRun {
			fmt.Fprintln(rw.w, "dry_run true")
		}
		for _, f := range r.shown() {
			if _, err := fmt.Fprintf(rw.w, "%s %s\n", f.Name, f.Text()); err != nil {
				return err
			}
		}
		if r.Throttle != "" {
			// A name and a value like the rest; the value is the
			// reason, on one line whatever the error said.
			_, err := fmt.Fprintf(rw.w, "throttle_unavailable %s\n", oneLine(r.Throttle))
			return err
		}
		return nil
	}
	e := statEntry{Cgroup: r.Cgroup, Managed: r.Managed, Unmanaged: r.Unmanaged, State: r.state(), Since: r.since(),
		DryRun: r.DryRun, Stats: make(map[string]any, len(r.Fields)), Throttle: r.Throttle}
	for _, f := range r.shown() {
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

// statEntry is one cgroup of `memcgd stat --json`.
type statEntry struct {
	Cgroup    host.Cgroup    `json:"cgroup"`
	Managed   bool           `json:"managed"`
	Unmanaged string         `json:"unmanaged,omitempty"`
	State     *string        `json:"state,omitempty"`
	Since     string         `json:"since,omitempty"`
	DryRun    bool           `json:"dry_run,omitempty"`
	Stats     map[string]any `json:"stats"`
	Throttle  string         `json:"throttle_unavailable,omitempty"`
}

// oneLine is s on one line, its white space runs each one space: the
// value of a text line, whatever an error said.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

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
