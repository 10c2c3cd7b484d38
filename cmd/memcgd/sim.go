package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/memcgd/memcgd/sim/kernel"
	simreport "github.com/memcgd/memcgd/sim/report"
	simrun "github.com/memcgd/memcgd/sim/run"
	"github.com/memcgd/memcgd/sim/scenario"
	"github.com/memcgd/memcgd/sim/sweep"
)

type simFlags struct {
	list     bool
	sets     []string
	variants []string
	seed     int64
	csv      string
	plots    string
	timing   bool
	stat     bool
	jobs     int
}

func newSimCmd() *cobra.Command {
	f := &simFlags{}
	c := &cobra.Command{
		Use:   "sim [SCENARIO]",
		Short: "Simulate a scenario on the stock kernel, the seed patch sets and memcgd, deterministically",
		Long: `memcgd sim runs a scenario (an embedded one by name, or a YAML file) on a
discrete-event model of the kernel's memory cgroups, page cache, dirty
throttling, flushers and reclaim, once per variant (the stock kernel, the
seed patch sets as kernel options, memcgd's policy on the stock kernel),
and prints the seed's table with one column per variant. The same scenario
and seed give byte-identical output. See docs/sim.md.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.list || len(args) == 0 {
				return listScenarios(cmd.OutOrStdout())
			}
			sc, err := loadScenario(args[0], f.sets, f.seed, f.variants)
			if err != nil {
				return err
			}
			rs, err := runVariants(sc, f.jobs, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if err := simreport.Write(cmd.OutOrStdout(), sc, rs); err != nil {
				return err
			}
			if f.stat {
				if err := simreport.WriteStat(cmd.OutOrStdout(), rs); err != nil {
					return err
				}
			}
			if f.timing {
				for _, r := range rs {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s: %.1f s simulated in %v wall, %d events, %d page ops (%.1f M page ops/s, %.0f simulated s per wall s)\n",
						r.Variant, r.End.Seconds(), r.Wall.Round(time.Millisecond), r.Events, r.PageOps,
						float64(r.PageOps)/r.Wall.Seconds()/1e6, r.End.Seconds()/r.Wall.Seconds())
				}
			}
			if f.csv != "" {
				if err := writeFile(f.csv, func(w io.Writer) error { return simreport.CSV(w, rs) }); err != nil {
					return err
				}
			}
			if f.plots != "" {
				files, err := simreport.Plots(f.plots, sc, rs)
				if err != nil {
					return err
				}
				for _, name := range files {
					fmt.Fprintln(cmd.ErrOrStderr(), name)
				}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&f.list, "list", false, "list the embedded scenarios")
	c.Flags().StringArrayVar(&f.sets, "set", nil, "override a scenario field, `PATH=VALUE` (e.g. cgroups[0].limit=200M); repeatable")
	c.Flags().StringSliceVar(&f.variants, "variant", nil, "run only these variants, `NAMES` separated by commas")
	c.Flags().Int64Var(&f.seed, "seed", -1, "override the scenario's seed")
	c.Flags().StringVar(&f.csv, "csv", "", "write the time series of every variant to this CSV `FILE`")
	c.Flags().StringVar(&f.plots, "plot", "", "write PNG and SVG plots into this `DIR`")
	c.Flags().BoolVar(&f.stat, "stat", false, "also print each variant's memory.stat of the focus cgroup and /proc/vmstat at the end")
	c.Flags().BoolVar(&f.timing, "timing", false, "print wall time and simulation speed per variant to stderr")
	c.Flags().IntVarP(&f.jobs, "jobs", "j", runtime.NumCPU(), "variants run in parallel")
	c.AddCommand(newSimSweepCmd())
	// The shell completes the embedded scenarios' names, and files.
	c.ValidArgsFunction = func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return scenario.Names(), cobra.ShellCompDirectiveDefault
	}
	return c
}

// listWidth is the width sim --list fills its descriptions to.
const listWidth = 80

// listScenarios prints each embedded scenario's name and its whole
// description, wrapped beside the names, a blank line between.
func listScenarios(w io.Writer) error {
	names := scenario.Names()
	col := 0
	for _, n := range names {
		col = max(col, len(n)+2)
	}
	for i, n := range names {
		b, err := scenario.Embedded(n)
		if err != nil {
			return err
		}
		sc, err := scenario.Parse(b)
		if err != nil {
			return fmt.Errorf("embedded scenario %s: %w", n, err)
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		head := n
		for _, l := range wrap(sc.Description, listWidth-col) {
			if _, err := fmt.Fprintf(w, "%-*s%s\n", col, head, l); err != nil {
				return err
			}
			head = ""
		}
		if sc.Description == "" {
			fmt.Fprintln(w, n)
		}
	}
	return nil
}

// loadScenario reads an embedded scenario by name or a YAML file.
func loadScenario(name string, sets []string, seed int64, variants []string) (*scenario.Scenario, error) {
	b, err := scenarioYAML(name)
	if err != nil {
		return nil, err
	}
	var as []scenario.Assignment
	for _, s := range sets {
		a, err := scenario.ParseAssignment(s)
		if err != nil {
			return nil, usage(err)
		}
		as = append(as, a)
	}
	sc, err := scenario.Parse(b, as...)
	var se *scenario.SetError
	switch {
	case errors.As(err, &se):
		return nil, usage(err) // it names the --set argument, not the file
	case err != nil:
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if seed >= 0 {
		sc.Seed = uint64(seed)
	}
	if len(variants) > 0 {
		if err := sc.SelectVariants(variants); err != nil {
			return nil, usagef("--variant: %w", err)
		}
	}
	return sc, nil
}

// runVariants runs every variant, jobs at a time, with a progress bar on
// stderr when it is a terminal and the runs take more than 2 s.
func runVariants(sc *scenario.Scenario, jobs int, stderr io.Writer) ([]*simrun.Result, error) {
	rs := make([]*simrun.Result, len(sc.Variants))
	errs := make([]error, len(sc.Variants))
	prog := make([]atomic.Int64, len(sc.Variants))
	until := kernel.Time(sc.Until)
	stop := startProgress(stderr, func() float64 {
		var sum float64
		for i := range prog {
			sum += float64(prog[i].Load()) / float64(until)
		}
		return sum / float64(len(prog))
	})
	defer stop()
	sem := make(chan struct{}, max(jobs, 1))
	var wg sync.WaitGroup
	for i, v := range sc.Variants {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rs[i], errs[i] = simrun.Variant(sc, v, func(now, _ kernel.Time) { prog[i].Store(int64(now)) })
			prog[i].Store(int64(until))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return rs, nil
}

// startProgress shows a bar once 2 s have passed, if w is a terminal.
func startProgress(w io.Writer, frac func() float64) (stop func()) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-done:
			return
		case <-time.After(2 * time.Second):
		}
		bar := progressbar.NewOptions(1000, progressbar.OptionSetWriter(f), progressbar.OptionSetDescription("simulating"),
			progressbar.OptionShowElapsedTimeOnFinish(), progressbar.OptionClearOnFinish())
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				_ = bar.Finish()
				return
			case <-tick.C:
				_ = bar.Set(int(frac() * 1000))
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func writeFile(name string, f func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(name), err)
	}
	out, err := os.Create(name)
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	if err := f(out); err != nil {
		out.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("close %s: %w", name, err)
	}
	return nil
}

func newSimSweepCmd() *cobra.Command {
	var sets []string
	var shardFlag, output string
	var jobs int
	c := &cobra.Command{
		Use:   "sweep SCENARIO --set path=v1,v2,... [--set ...] [--shard i/n]",
		Short: "Run a scenario over a grid of field values, in parallel; --shard runs one slice of the grid",
		Long: `memcgd sim sweep runs every point of the grid the --set flags span (the
first flag varies slowest) with every variant of the scenario, jobs at a
time, and prints one CSV line per point and variant. --shard i/n runs the
points whose index is i modulo n, so that a large sweep can run as a
Kubernetes Indexed Job (deploy/sim-sweep-job.yaml); "memcgd sim sweep merge"
joins the shards' outputs into exactly the unsharded output.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var axes []sweep.Axis
			for _, s := range sets {
				a, err := sweep.ParseAxis(s)
				if err != nil {
					return usage(err)
				}
				axes = append(axes, a)
			}
			shard := sweep.Shard{Index: 0, Count: 1}
			if shardFlag != "" {
				var err error
				if shard, err = sweep.ParseShard(shardFlag); err != nil {
					return usage(err)
				}
			}
			b, err := scenarioYAML(args[0])
			if err != nil {
				return err
			}
			if output == "" {
				return sweep.Run(cmd.OutOrStdout(), b, axes, shard, jobs)
			}
			return writeFile(output, func(w io.Writer) error { return sweep.Run(w, b, axes, shard, jobs) })
		},
	}
	c.Flags().StringArrayVar(&sets, "set", nil, "a swept field and its values, `PATH=V1,V2,...`; repeatable")
	c.Flags().StringVar(&shardFlag, "shard", "", "run only shard i of n (0-based), `I/N`")
	c.Flags().IntVarP(&jobs, "jobs", "j", runtime.NumCPU(), "points run in parallel")
	c.Flags().StringVarP(&output, "output", "o", "", "write the CSV to this file instead of standard output (an image without a shell cannot redirect)")
	c.AddCommand(&cobra.Command{
		Use:   "merge FILE...",
		Short: "Merge the outputs of a sweep's shards into the unsharded output",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var rs []io.Reader
			for _, a := range args {
				f, err := os.Open(a)
				if err != nil {
					return fmt.Errorf("open shard: %w", err)
				}
				defer f.Close()
				rs = append(rs, f)
			}
			return sweep.Merge(cmd.OutOrStdout(), rs[0], rs[1:]...)
		},
	})
	return c
}

// scenarioYAML is the text of an embedded scenario or a file.
func scenarioYAML(name string) ([]byte, error) {
	if strings.ContainsRune(name, '/') || strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml") {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("read scenario: %w", err)
		}
		return b, nil
	}
	b, err := scenario.Embedded(name)
	return b, usage(err) // a name that is not embedded
}
