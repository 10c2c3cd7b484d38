package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/memcgd/memcgd/agent"
	"github.com/memcgd/memcgd/cgroupfs"
	"github.com/memcgd/memcgd/cgroupfs/act"
	"github.com/memcgd/memcgd/cgroupfs/dirtytrack"
	"github.com/memcgd/memcgd/cgroupfs/journal"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/cgroupfs/watch"
	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/control"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/metrics"
	"github.com/memcgd/memcgd/overrides"
	"github.com/memcgd/memcgd/policy"
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
	procRoot, configPath               string
	journal, overrides, socket, listen string
	allowNonLoopback                   bool
	dryRun                             bool
	workers                            int
	activeInterval, scanInterval       time.Duration
	pacedReportGap                     time.Duration
	writeOutGap, writeOutYield         time.Duration
	reaction, schedSlice               time.Duration
	logLevel                           string
	dirtyTracker, pace                 string
	goTrace                            string
	configCheck                        time.Duration
}

func newRunCmd() *cobra.Command {
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
the config, and so does a change of the --config file's content (read every
--config-check-interval: a mounted ConfigMap's update arrives so); a bad config,
or one that changes manage.under or names a subtree that does not exist, is
refused and the running one kept.

The metrics endpoint (--listen) also serves /healthz (alive) and /readyz (200
once the first scan of the cgroups is done, 503 with the reason before).

In a cgroup namespace of its own (a container's), the daemon joins PID 1's, the
host's with hostPID, and executes itself again there, or refuses to start.
It also executes itself again at start with schedtrace=2147483647 added to
GODEBUG, unless GODEBUG sets schedtrace: the Go runtime's sysmon then stays out
of the deep sleep after which it polls every 20 µs (one scheduler trace line at
most every 24.8 days of the host's uptime).

--dry-run observes and decides as the daemon does, and counts and logs what
it would have done (memcgd stat, memcgd top and the metrics show it, with
dry_run), but changes nothing: no write-out, flush, reclaim, freeze or pace,
no freezer or pace cgroup created, and the journal is not recovered (the log
says how many changes of a previous run it holds; the next real run undoes
them). Pair it with a config whose manage.under is one cgroup for a safe
first run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			return run(cmd.Context(), f)
		},
	}
	addConfigFlag(cmd, &f.configPath)
	addProcFlag(cmd, &f.procRoot)
	fl := cmd.Flags()
	fl.StringVar(&f.journal, "journal", "/var/lib/memcgd/journal", "undo journal of stateful changes, a `FILE`")
	fl.StringVar(&f.overrides, "overrides", overrides.DefaultPath, "the `FILE` where the overrides of memcgd set persist")
	fl.StringVar(&f.socket, "socket", control.DefaultSocket, "root-only control socket, a `PATH`")
	fl.StringVar(&f.listen, "listen", metrics.DefaultAddr, "Prometheus endpoint `HOST:PORT` (loopback unless --allow-non-loopback); empty disables it")
	fl.BoolVar(&f.allowNonLoopback, "allow-non-loopback", false, "allow --listen on a non-loopback address")
	fl.BoolVar(&f.dryRun, "dry-run", false, "observe, decide, count and log what the daemon would do, and change nothing (no write-out, reclaim, freeze or pace; the journal is not recovered)")
	fl.IntVar(&f.workers, "workers", agent.DefaultWorkers, "cgroups worked on at once")
	fl.DurationVar(&f.activeInterval, "active-interval", agent.DefaultActiveInterval, "longest interval between two looks at an active cgroup (the policy looks sooner as a cgroup dirties faster, down to 1 ms)")
	fl.DurationVar(&f.pacedReportGap, "paced-report-gap", 0, "least time from one look at a cgroup whose writers are paced to the next that a wake-up may ask for, at most the paced look's 5 ms; the kernel holds the pace meanwhile: less of the daemon's CPU for a looser hold on the dirty level (docs/throttle.md); 0 takes every wake-up at once")
	fl.DurationVar(&f.writeOutGap, "write-out-gap", 0, "time between the 1 MiB chunks of a targeted write-out, at most 1ms: a neighbour's fdatasync on the same device waits less behind the write-out, and a fast writer loses throughput (docs/throttle.md); 0 submits 4 MiB chunks back to back")
	fl.DurationVar(&f.writeOutYield, "write-out-yield", 0, "time between the 1 MiB chunks of a targeted write-out while another task syncs on the same device (a cache flush there within the last 100 ms), at most 1ms: the tail of its fsyncs' latency falls, their number and the writer's throughput fall a little (docs/throttle.md); 0 never yields")
	fl.DurationVar(&f.reaction, "reaction", agent.DefaultReaction, "the daemon's reaction delay the throttle anticipates: from a wake-up to the step it triggers")
	fl.DurationVar(&f.scanInterval, "scan-interval", agent.DefaultScanInterval, "interval of the safety scan for new and removed cgroups")
	fl.DurationVar(&f.schedSlice, "sched-slice", DefaultSchedSlice, "the scheduler slice of the daemon's threads (kernel 6.12 or later): a shorter one lets a wake-up preempt a running task sooner; 0 keeps the kernel's default")
	fl.StringVar(&f.goTrace, "go-trace", "", "write the Go runtime's execution trace to a new `FILE` until the daemon exits, to diagnose its latency (read it with go tool trace); tens of MB a minute when busy")
	fl.DurationVar(&f.configCheck, "config-check-interval", DefaultConfigCheck, "how often to read --config for a change, which reloads it as SIGHUP does (a mounted ConfigMap's update, an edit); 0 reloads on SIGHUP only")
	fl.StringVar(&f.logLevel, "log-level", "info", "the log's `LEVEL`: debug, info, warn or error")
	fl.StringVar(&f.pace, "pace", paceAuto, "how the throttle slows a cgroup's writers, a `MODE`: auto (from kernel 6.18, pace only the dirtying threads by CPU bandwidth where the hierarchy allows it, the freezer as the backstop; before 6.18, freeze the cgroup), on (pace on any kernel, with periods of at most 20 ms before 6.18) or off (freeze the cgroup)")
	fl.StringVar(&f.dirtyTracker, "dirty-tracker", trackerAuto, "the eBPF dirty tracker (docs/tracker.md), a `MODE`: auto (load it, poll if it cannot load), on (refuse to start without it) or off (poll)")
	complete := func(values ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)
	}
	_ = cmd.RegisterFlagCompletionFunc("dirty-tracker", complete(trackerAuto, trackerOn, trackerOff))
	_ = cmd.RegisterFlagCompletionFunc("log-level", complete("debug", "info", "warn", "error"))
	return cmd
}

// check refuses flag values that cannot work, before the daemon touches
// anything: usage errors.
func (f *runFlags) check() error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return usagef("--log-level: invalid value %q: allowed debug, info, warn or error", f.logLevel)
	}
	switch f.dirtyTracker {
	case trackerAuto, trackerOn, trackerOff:
	default:
		return usagef("--dirty-tracker: invalid value %q: allowed auto, on or off", f.dirtyTracker)
	}
	switch f.pace {
	case paceAuto, paceOn, paceOff:
	default:
		return usagef("--pace: invalid value %q: allowed auto, on or off", f.pace)
	}
	if err := checkSchedSlice(f.schedSlice); err != nil {
		return usage(err)
	}
	if f.pacedReportGap < 0 || f.pacedReportGap > policy.PaceInterval {
		return usagef("--paced-report-gap: invalid value %v: allowed 0 (every wake-up at once) to %v (the paced look's interval)", f.pacedReportGap, policy.PaceInterval)
	}
	if f.writeOutGap < 0 || f.writeOutGap > act.MaxWriteOutGap {
		return usagef("--write-out-gap: invalid value %v: allowed 0 (back to back) to %v", f.writeOutGap, act.MaxWriteOutGap)
	}
	if f.writeOutYield < 0 || f.writeOutYield > act.MaxWriteOutGap {
		return usagef("--write-out-yield: invalid value %v: allowed 0 (never) to %v", f.writeOutYield, act.MaxWriteOutGap)
	}
	if f.workers <= 0 {
		return usagef("--workers: invalid value %d: allowed 1 or more", f.workers)
	}
	if f.listen != "" {
		if err := checkListen(f.listen, f.allowNonLoopback); err != nil {
			return usage(err)
		}
	}
	return nil
}

// checkListen checks --listen: host:port, and a loopback host unless
// --allow-non-loopback. metrics.Listen checks the same, but does not
// know the flags' names.
func checkListen(addr string, allowNonLoopback bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen: invalid value %q: allowed HOST:PORT, e.g. %s, or empty for no metrics endpoint", addr, metrics.DefaultAddr)
	}
	if allowNonLoopback {
		return nil
	}
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--listen: invalid value %q: allowed a loopback address (127.0.0.1, [::1], localhost); add --allow-non-loopback to serve the metrics beyond this host", addr)
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
// it returns nil and why. levels asks for the level programs, which only
// a pacing daemon uses (policy.Input.LevelWakes).
func loadTracker(mode string, levels bool, log *slog.Logger) (*dirtytrack.Tracker, string, error) {
	switch mode {
	case trackerOff:
		return nil, "disabled by --dirty-tracker=off", nil
	case trackerAuto, trackerOn:
	default:
		return nil, "", fmt.Errorf("--dirty-tracker: invalid value %q: allowed auto, on or off", mode)
	}
	tr, err := dirtytrack.Load(dirtytrack.Options{Logger: log, Levels: levels})
	switch {
	case err == nil:
		return tr, "", nil
	case mode == trackerOn:
		return nil, "", fmt.Errorf("--dirty-tracker=on: %w", err)
	default:
		return nil, err.Error(), nil
	}
}

func run(ctx context.Context, f *runFlags) error {
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
	_ = level.UnmarshalText([]byte(f.logLevel)) // checked by runFlags.check
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	// First: in a cgroup namespace of its own, memcgd executes itself
	// again in the host's (cgroupns.go) and this image goes no further.
	l, err := hostLayout(f.procRoot, log)
	if err != nil {
		return err
	}
	logMissingCapabilities(log, f.procRoot)
	if os.Getenv("GOGC") == "" {
		// A daemon over thousands of idle cgroups holds their state,
		// and the default goal lets its heap grow to twice that; a busy
		// cgroup's steps leave little garbage, so a lower goal costs
		// them few collections (docs/lab/2026-12-04-allocations.md).
		debug.SetGCPercent(75)
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

	if f.configCheck < 0 {
		return fmt.Errorf("--config-check-interval: invalid value %v: allowed a positive duration, or 0 for SIGHUP only", f.configCheck)
	}
	cfg, loaded, err := readConfigIn(f.configPath, l)
	if err != nil {
		return err
	}
	reloads := metrics.NewConfigReloads(time.Now())
	j, err := journal.OpenJournal(f.journal, l)
	if err != nil {
		return err
	}
	defer j.Close()
	// Undo whatever a previous run left behind before doing anything,
	// to the end even if a SIGTERM comes meanwhile; a dry run changes
	// nothing, that undo included.
	if err := recoverAtStart(j, f.dryRun, log); err != nil {
		return err
	}
	ov, err := overrides.Load(f.overrides, overrides.DirInode(l.Memory.Dir))
	if err != nil {
		return err
	}
	for _, cg := range ov.Stale() {
		log.Warn("dropped the overrides of a cgroup removed or created again since they were set", "cgroup", cg)
	}
	release, err := kernelRelease()
	if err != nil {
		return err
	}
	pace, periodCap, note := pacing(f.pace, release)
	if note != "" {
		log.Info("pacing off", "reason", note)
	}
	tr, noTracker, err := loadTracker(f.dirtyTracker, pace, log)
	if err != nil {
		return err
	}
	if tr != nil {
		// After the agent and the watcher: FS uses it to its last call.
		defer tr.Close()
	}
	fs, err := cgroupfs.NewFSOptions(l, f.procRoot, cfg.Under, j, cgroupfs.FSOptions{
		Tracker: tr, NoTracker: noTracker, Log: log, WriteOutGap: f.writeOutGap, WriteOutYield: f.writeOutYield,
	})
	if err != nil {
		return err
	}
	defer fs.Close()
	w, err := fs.NewWatcher(watch.WatcherOptions{})
	if err != nil {
		return err
	}
	self, err := selfCgroups(f.procRoot, l)
	if err != nil {
		w.Close()
		return err
	}
	a, err := agent.New(agent.Options{
		Host: fs, Watcher: w, Config: cfg, Overrides: ov, Log: log, Self: self,
		Workers: f.workers, ActiveInterval: f.activeInterval, ScanInterval: f.scanInterval,
		Reaction: f.reaction, NoPace: !pace, PacePeriodCap: periodCap, PacedReportGap: f.pacedReportGap,
		DryRun: f.dryRun,
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
			metrics.WithDropped(w), metrics.WithDirtyTracking(path),
			metrics.WithBuildInfo(thisBuild().metrics()), metrics.WithConfigReloads(reloads),
			metrics.WithJournal(j.Path(), func() int { return len(j.Pending()) }), metrics.WithCallCPU(a.CallCPU), metrics.WithCalls(a.Calls),
			metrics.WithTimerLateness(agent.LatenessBounds[:], a.TimerLateness))
		if err != nil {
			return err
		}
		mln, err := metrics.Listen(f.listen, f.allowNonLoopback)
		if err != nil {
			return err
		}
		go func() {
			err := metrics.Serve(ctx, mln, metrics.Handler(reg, log), metrics.ServerOptions{Ready: a.Ready})
			if err != nil && ctx.Err() == nil {
				fail(fmt.Errorf("metrics endpoint: %w", err))
			}
		}()
	}

	changed := make(chan struct{}, 1)
	if f.configPath != "" && f.configCheck > 0 {
		go watchConfig(ctx, f.configPath, loaded, f.configCheck, log, changed)
	}
	go reloadLoop(ctx, hup, changed, &reloader{
		load: func() (*config.Config, error) { return loadConfigIn(f.configPath, l) }, apply: a.Reload, running: cfg, reloads: reloads,
		log: log, path: f.configPath, now: time.Now,
	})

	log.Info("memcgd running", "build", thisBuild().Version, "memory", l.Memory.Mount, "version", l.Memory.Version.String(),
		"under", cfg.Under, "self", self, "metrics", f.listen, "socket", f.socket)
	// Run returns within its stop timeout of ctx's end, even with a host
	// call stuck in the kernel, so that the undo below always runs.
	runErr := a.Run(ctx)
	// Full flushes run past the step that started them; let them finish,
	// within a bound, so that none is cut off mid-syncfs by the exit.
	waitFlushes(fs, log)
	// Let the v1 freezer anchor go (thawed, its record done, removed) and
	// remove the empty freezer mirrors, before the undo below: Recover
	// would otherwise thaw the anchor as if a change had been left behind,
	// and the anchor's own release then find its record gone.
	fs.Close()
	// Run has ended every pause; undo anything still journalled (a squeeze
	// interrupted by the signal) so that nothing the daemon changed remains.
	// A dry run changed nothing, and leaves a previous run's records.
	if !f.dryRun {
		undone, err := j.Recover(context.Background())
		for _, c := range undone {
			log.Info("undid at exit", "change", c.String())
		}
		if err != nil {
			return errors.Join(runErr, fmt.Errorf("undo at exit: %w", err))
		}
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

// recoverAtStart undoes the changes a previous run left in j, or in a dry
// run says that nothing will be changed and how many it leaves.
func recoverAtStart(j *journal.Journal, dryRun bool, log *slog.Logger) error {
	if dryRun {
		log.Info("dry run: nothing will be changed; the journal is not recovered",
			"journal", j.Path(), "pending", len(j.Pending()))
		return nil
	}
	undone, err := j.Recover(context.Background())
	for _, c := range undone {
		log.Warn("undid a change left by a previous run", "change", c.String())
	}
	if err != nil {
		return fmt.Errorf("recover journal: %w", err)
	}
	return nil
}
