package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/memcgd/memcgd/agent"
	"github.com/memcgd/memcgd/cgroupfs"
	"github.com/memcgd/memcgd/cgroupfs/dirtytrack"
	"github.com/memcgd/memcgd/cgroupfs/journal"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/cgroupfs/watch"
	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/control"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/metrics"
	"github.com/memcgd/memcgd/overrides"
	"github.com/memcgd/memcgd/state"
)

// flushWait bounds how long the daemon waits at exit for the full flushes
// in progress: a syncfs on a slow device must not hold back the undo.
const flushWait = 2 * time.Second

// flushWaiter is a host whose full flushes outlive the call that starts
// them (cgroupfs.FS).
type flushWaiter interface {
	WaitFlushes(ctx context.Context) error
}

// waitFlushes waits for h's flushes in progress, at most flushWait.
func waitFlushes(h any, log *slog.Logger) {
	fw, ok := h.(flushWaiter)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), flushWait)
	defer cancel()
	if err := fw.WaitFlushes(ctx); err != nil {
		log.Warn("full flushes still running at exit", "waited", flushWait, "err", err)
	}
}

// runFlags are `memcgd run`'s own flags.
type runFlags struct {
	journal, overrides, socket, listen string
	allowNonLoopback                   bool
	workers                            int
	activeInterval, scanInterval       time.Duration
	reaction, schedSlice               time.Duration
	logLevel                           string
	dirtyTracker                       string
	goTrace                            string
}

func newRunCmd(g *globalFlags) *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the daemon: dirty limits, background reclaim and writeback-first for every managed cgroup",
		Long: `Run the memcgd daemon. It manages the cgroups the config selects (with no
--config, the embedded default policy: every cgroup with a memory limit), wakes on
their events, and for each: writes out its files past dirty_background, throttles
its writers (freezing it for at most 200 ms at a time) past the freerun ceiling
below dirty_thresh, reclaims in the background from low_wmark to high_wmark, and
when reclaim meets dirty pages writes back the cgroup's own files first.

Every stateful change (a lowered v1 limit, a frozen cgroup) is journalled first
and undone on SIGTERM and at the next start. The cgroups that hold the daemon
itself (its own and their ancestors) are never frozen nor reclaimed: the log
and the daemon's status report them as "not throttled: holds memcgd". SIGHUP reloads
the config; a bad config, or one that changes manage.under or names a subtree
that does not exist, is refused and the running one kept.

In a cgroup namespace of its own (a container's), the daemon joins PID 1's, the
host's with hostPID, and executes itself again there, or refuses to start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), g, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.journal, "journal", "/var/lib/memcgd/journal", "undo journal of stateful changes")
	fl.StringVar(&f.overrides, "overrides", "/var/lib/memcgd/overrides.json", "where `memcgd set` overrides persist")
	fl.StringVar(&f.socket, "socket", control.DefaultSocket, "root-only control socket")
	fl.StringVar(&f.listen, "listen", metrics.DefaultAddr, "Prometheus endpoint address (loopback unless --allow-non-loopback); empty disables it")
	fl.BoolVar(&f.allowNonLoopback, "allow-non-loopback", false, "allow --listen on a non-loopback address")
	fl.IntVar(&f.workers, "workers", agent.DefaultWorkers, "cgroups worked on at once")
	fl.DurationVar(&f.activeInterval, "active-interval", agent.DefaultActiveInterval, "longest interval between two looks at an active cgroup (the policy looks sooner as a cgroup dirties faster, down to 1 ms)")
	fl.DurationVar(&f.reaction, "reaction", agent.DefaultReaction, "the daemon's reaction delay the throttle anticipates: from a wake-up to the step it triggers")
	fl.DurationVar(&f.scanInterval, "scan-interval", agent.DefaultScanInterval, "interval of the safety scan for new and removed cgroups")
	fl.DurationVar(&f.schedSlice, "sched-slice", DefaultSchedSlice, "the scheduler slice of the daemon's threads (kernel 6.12 or later): a shorter one lets a wake-up preempt a running task sooner; 0 keeps the kernel's default")
	fl.StringVar(&f.goTrace, "go-trace", "", "write the Go runtime's execution trace to this file until the daemon exits, to diagnose its latency (`go tool trace`); tens of MB a minute when busy")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&f.dirtyTracker, "dirty-tracker", trackerAuto, "the eBPF dirty tracker (docs/tracker.md): auto (load it, poll if it cannot load), on (refuse to start without it) or off (poll)")
	return cmd
}

// The values of --dirty-tracker.
const (
	trackerAuto = "auto"
	trackerOn   = "on"
	trackerOff  = "off"
)

// loadTracker loads the eBPF dirty tracker as --dirty-tracker asks. With
// auto, a tracker that cannot load (no BTF, an old kernel, lockdown,
// missing CAP_BPF or CAP_PERFMON) leaves the daemon on the polling path:
// it returns nil and why.
func loadTracker(mode string, log *slog.Logger) (*dirtytrack.Tracker, string, error) {
	switch mode {
	case trackerOff:
		return nil, "disabled by --dirty-tracker=off", nil
	case trackerAuto, trackerOn:
	default:
		return nil, "", fmt.Errorf("--dirty-tracker: invalid value %q: allowed auto, on or off", mode)
	}
	tr, err := dirtytrack.Load(dirtytrack.Options{Logger: log})
	switch {
	case err == nil:
		return tr, "", nil
	case mode == trackerOn:
		return nil, "", fmt.Errorf("--dirty-tracker=on: %w", err)
	default:
		return nil, err.Error(), nil
	}
}

func run(ctx context.Context, g *globalFlags, f *runFlags) error {
	// Signals first: until signal.Notify, SIGHUP's default action kills
	// the daemon, and a reload sent during the start (journal recovery,
	// the first scan) must not. A SIGHUP that comes early waits in hup
	// for the reload loop; a SIGTERM ends the start, then the undo runs.
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	if err := requireRoot("memcgd run"); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return fmt.Errorf("--log-level: invalid value %q: allowed debug, info, warn or error", f.logLevel)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	// First: in a cgroup namespace of its own, memcgd executes itself
	// again in the host's (cgroupns.go) and this image goes no further.
	l, err := hostLayout(g.procRoot, log)
	if err != nil {
		return err
	}
	logMissingCapabilities(log, g.procRoot)
	if err := checkSchedSlice(f.schedSlice); err != nil {
		return err
	}
	logSchedSlice(log, f.schedSlice)
	raiseProcs(log, f.workers)
	if f.goTrace != "" {
		stopTrace, err := startGoTrace(f.goTrace)
		if err != nil {
			return err
		}
		defer stopTrace()
	}

	cfg, err := g.loadConfigIn(l)
	if err != nil {
		return err
	}
	j, err := journal.OpenJournal(f.journal, l)
	if err != nil {
		return err
	}
	defer j.Close()
	// Undo whatever a previous run left behind before doing anything,
	// to the end even if a SIGTERM comes meanwhile.
	undone, err := j.Recover(context.Background())
	for _, c := range undone {
		log.Warn("undid a change left by a previous run", "change", c.String())
	}
	if err != nil {
		return fmt.Errorf("recover journal: %w", err)
	}
	ov, err := overrides.Load(f.overrides, overrides.DirInode(l.Memory.Dir))
	if err != nil {
		return err
	}
	for _, cg := range ov.Stale() {
		log.Warn("dropped the overrides of a cgroup removed or created again since they were set", "cgroup", cg)
	}
	tr, noTracker, err := loadTracker(f.dirtyTracker, log)
	if err != nil {
		return err
	}
	if tr != nil {
		// After the agent and the watcher: FS uses it to its last call.
		defer tr.Close()
	}
	fs, err := cgroupfs.NewFSOptions(l, g.procRoot, cfg.Under, j, cgroupfs.FSOptions{
		Tracker: tr, NoTracker: noTracker, Log: log,
	})
	if err != nil {
		return err
	}
	defer fs.Close()
	w, err := fs.NewWatcher(watch.WatcherOptions{})
	if err != nil {
		return err
	}
	self, err := selfCgroups(g.procRoot, l)
	if err != nil {
		w.Close()
		return err
	}
	a, err := agent.New(agent.Options{
		Host: fs, Watcher: w, Config: cfg, Overrides: ov, Log: log, Self: self,
		Workers: f.workers, ActiveInterval: f.activeInterval, ScanInterval: f.scanInterval,
		Reaction: f.reaction,
	})
	if err != nil {
		w.Close()
		return err
	}

	// A server that fails stops the daemon, which then undoes its changes.
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)

	ln, err := control.Listen(f.socket)
	if err != nil {
		return err
	}
	srv := &control.Server{Backend: a, Log: log}
	go func() {
		if err := srv.Serve(ctx, ln); err != nil && ctx.Err() == nil {
			fail(fmt.Errorf("control socket: %w", err))
		}
	}()
	if f.listen != "" {
		path, _ := a.DirtyTracking()
		reg, err := metrics.NewRegistry(func() []state.Status { s, _ := a.Status(""); return s },
			metrics.WithDropped(w), metrics.WithDirtyTracking(path))
		if err != nil {
			return err
		}
		mln, err := metrics.Listen(f.listen, f.allowNonLoopback)
		if err != nil {
			return err
		}
		go func() {
			if err := metrics.Serve(ctx, mln, metrics.Handler(reg, log)); err != nil && ctx.Err() == nil {
				fail(fmt.Errorf("metrics endpoint: %w", err))
			}
		}()
	}

	go func() {
		running := cfg
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
			}
			next, err := g.loadConfigIn(l)
			if err == nil {
				err = reloadable(running, next)
			}
			if err != nil {
				log.Error("config reload refused; keeping the running config", "err", err)
				continue
			}
			a.Reload(next)
			running = next
			log.Info("config reloaded", "config", g.configPath)
		}
	}()

	log.Info("memcgd running", "memory", l.Memory.Mount, "version", l.Memory.Version.String(),
		"under", cfg.Under, "self", self, "metrics", f.listen, "socket", f.socket)
	// Run returns within its stop timeout of ctx's end, even with a host
	// call stuck in the kernel, so that the undo below always runs.
	runErr := a.Run(ctx)
	// Full flushes run past the step that started them; let them finish,
	// within a bound, so that none is cut off mid-syncfs by the exit.
	waitFlushes(fs, log)
	// Run has ended every pause; undo anything still journalled (a squeeze
	// interrupted by the signal) so that nothing the daemon changed remains.
	undone, err = j.Recover(context.Background())
	for _, c := range undone {
		log.Info("undid at exit", "change", c.String())
	}
	if err != nil {
		return errors.Join(runErr, fmt.Errorf("undo at exit: %w", err))
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return errors.Join(runErr, cause)
	}
	log.Info("memcgd stopped")
	return runErr
}

// selfCgroups returns the daemon's own cgroups, one per hierarchy it could
// pause or squeeze through: memory, and the unified and v1 freezer ones
// when mounted. The agent never pauses nor reclaims a cgroup that holds
// one of them. The daemon refuses to start without knowing them all: it
// could freeze itself.
func selfCgroups(procRoot string, l layout.Layout) ([]host.Cgroup, error) {
	mem, err := layout.Self(procRoot, l)
	if err != nil {
		return nil, fmt.Errorf("find the daemon's own memory cgroup, which it must never throttle: %w", err)
	}
	self := []host.Cgroup{mem}
	if l.Unified != nil && l.Memory.Version == layout.V1 {
		cg, err := layout.SelfUnified(procRoot)
		if err != nil {
			return nil, fmt.Errorf("find the daemon's own unified cgroup, which it must never freeze: %w", err)
		}
		self = append(self, cg)
	}
	if l.Freezer != nil {
		cg, err := layout.SelfFreezer(procRoot)
		if err != nil {
			return nil, fmt.Errorf("find the daemon's own freezer cgroup, which it must never freeze: %w", err)
		}
		self = append(self, cg)
	}
	return self, nil
}

// reloadable checks that next can replace the running config. The managed
// subtree is fixed at start: the host, its watches and the journal work in
// it, and a subtree left behind would keep what the daemon had set there.
// So a change of manage.under is refused, the safe choice, rather than
// half applied.
func reloadable(running, next *config.Config) error {
	if next.Under != running.Under {
		return fmt.Errorf("manage.under: changed from %s to %s: the managed subtree is fixed at start; allowed only %s (restart memcgd to manage another subtree)",
			running.Under, next.Under, running.Under)
	}
	return nil
}
