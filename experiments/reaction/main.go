// Command reaction measures how soon memcgd's eBPF dirty tracker reports
// a write: from the write(2) that dirties a cgroup's pages past the
// wake-up threshold the daemon set to the report's arrival on the
// Watcher's Events channel, the channel the agent's loop receives from
// (issue 7: p99 ≤ 2 ms on the tracker path).
//
// It loads the tracker (cgroupfs/dirtytrack) and builds the daemon's
// cgroupfs.FS and TrackedWatcher over the lab's subtree, as `memcgd run`
// does, then -n times: arms the watch -room bytes above what the cgroup
// has dirtied, has a writer in the cgroup (experiments/writer -stdin)
// write -step bytes in one write(2), and waits for the report. Both ends
// read CLOCK_MONOTONIC: the writer just before its write(2), this program
// on receiving the report. With -load a second writer, in a cgroup
// limited to 100 MiB, writes at -load-rate throughout, as a loaded node
// would. It prints the distribution of the latencies.
//
// This is the Watcher's figure, not the daemon's: the agent's step that
// follows a report (reading memory.stat, deciding, freezing) comes on
// top, and is not timed here. With -daemon, memcgd itself runs and the
// figure is from the write(2) to the daemon's first read of the cgroup's
// files (daemon.go).
//
//	go run ./experiments/reaction [-n 1000] [-step 512K] [-room 256K] [-load] [-load-rate 200M]
//	go run ./experiments/reaction -daemon [-n 100] [-trickle 128K] [-trickle-every 10ms]
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/memcgd/memcgd/cgroupfs"
	"github.com/memcgd/memcgd/cgroupfs/dirtytrack"
	"github.com/memcgd/memcgd/cgroupfs/watch"
	"github.com/memcgd/memcgd/experiments/internal/lab"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

func main() {
	f := lab.Flags{VMDefaults: map[string]string{"n": "200"}}
	f.Register(flag.CommandLine)
	e := experiment{step: 512 << 10, room: 256 << 10, loadRate: 200 << 20, timeout: time.Second}
	flag.IntVar(&e.n, "n", 1000, "wake-ups to measure")
	flag.Var(&e.step, "step", "bytes of each write(2) that passes the threshold")
	flag.Var(&e.room, "room", "wake-up threshold above what the cgroup had dirtied when armed")
	flag.BoolVar(&e.load, "load", false, "run a second writer throughout, in a cgroup limited to 100 MiB")
	flag.Var(&e.loadRate, "load-rate", "rate of the -load writer, bytes per second (0: unpaced)")
	flag.DurationVar(&e.timeout, "timeout", time.Second, "longest wait for one report; one later than this counts as lost")
	flag.BoolVar(&e.daemon, "daemon", false, "measure memcgd itself: from the write(2) to its first read of the cgroup's files (see daemon.go)")
	e.dirtyBytes, e.trickle = 16<<20, 128<<10
	flag.Var(&e.dirtyBytes, "dirty-bytes", "with -daemon: dirty_bytes of the cgroup (dirty_background_bytes is half)")
	flag.Var(&e.trickle, "trickle", "with -daemon: bytes of each write(2)")
	flag.DurationVar(&e.trickleEvery, "trickle-every", 10*time.Millisecond, "with -daemon: interval between two writes")
	flag.DurationVar(&e.quiet, "quiet", 300*time.Millisecond, "with -daemon: how long the daemon must leave the cgroup alone before a wake-up")
	flag.Parse()
	switch {
	case e.n < 1:
		fmt.Fprintf(os.Stderr, "-n: invalid value %d: want 1 or more\n", e.n)
		os.Exit(2)
	case e.step <= e.room:
		fmt.Fprintf(os.Stderr, "-step %s: invalid: want more than -room (%s), so that each write passes the threshold\n", e.step.String(), e.room.String())
		os.Exit(2)
	}
	lab.Main("./experiments/reaction", f, e.run)
}

type experiment struct {
	n          int
	step, room lab.Size
	load       bool
	loadRate   lab.Size
	timeout    time.Duration
	// -daemon: memcgd's own reaction (daemon.go).
	daemon              bool
	dirtyBytes, trickle lab.Size
	trickleEvery, quiet time.Duration
}

func (e experiment) run(ctx context.Context, b *lab.Bench) error {
	if e.daemon {
		return e.runDaemon(ctx, b)
	}
	tr, err := dirtytrack.Load(dirtytrack.Options{})
	if err != nil {
		return fmt.Errorf("the tracker does not load here, so there is no tracker path to measure: %w", err)
	}
	defer tr.Close()
	fs, err := cgroupfs.NewFSOptions(b.Layout, "/proc", b.Root.Path, nil, cgroupfs.FSOptions{Tracker: tr})
	if err != nil {
		return err
	}
	if p := fs.DirtyPath(); !p.Tracker {
		return fmt.Errorf("the FS's dirty path is %v with the tracker loaded, want the tracker", p)
	}
	c, err := b.Cgroup(nil, "reaction", lab.CgroupOptions{})
	if err != nil {
		return err
	}
	w, err := fs.NewWatcher(watch.WatcherOptions{})
	if err != nil {
		return err
	}
	defer w.Close()

	load := "none"
	if e.load {
		stop, err := e.startLoad(ctx, b)
		if err != nil {
			return err
		}
		defer stop()
		load = fmt.Sprintf("a second writer, 1 MiB writes %s, in a cgroup limited to 100M", rate(e.loadRate))
	}
	fmt.Printf("%d wake-ups: each arms the watch %s above what the cgroup dirtied, then one write(2) of %s. Load: %s.\n\n",
		e.n, e.room.String(), e.step.String(), load)

	d, err := startDirtier(ctx, b, c, b.File("reaction"))
	if err != nil {
		return err
	}
	defer d.close()
	lat := make(lab.Series, 0, e.n)
	lost := 0
	start := time.Now()
	for i := range e.n {
		before, err := fs.DirtyCounts(ctx, c.Path)
		if err != nil {
			return err
		}
		if err := w.Watch(c.Path, host.Wake{UsageAbove: memcg.NoLimit, DirtiedAbove: before.Dirtied + uint64(e.room)}); err != nil {
			return err
		}
		t0, err := d.write(uint64(e.step))
		if err != nil {
			return err
		}
		at, ok := await(ctx, w.Events(), c.Path, e.timeout)
		if !ok {
			if err := ctx.Err(); err != nil {
				return err
			}
			// A lost report: counted in the distribution at the
			// timeout (a lower bound), and told.
			after, err := fs.DirtyCounts(ctx, c.Path)
			if err != nil {
				return err
			}
			fmt.Printf("(wake-up %d lost: armed at %d + %s, then one write(2) of %s; no report within %v; the tracker counts %d dirtied now)\n",
				i, before.Dirtied, e.room.String(), e.step.String(), e.timeout, after.Dirtied)
			lost++
			lat = append(lat, uint64(e.timeout))
			continue
		}
		lat = append(lat, uint64(max(at-t0, 0)))
	}
	wall := time.Since(start)

	t := lab.Table{Header: []string{"wake-ups", "lost (no report within -timeout)", "p50 (µs)", "p90 (µs)", "p99 (µs)", "p99.9 (µs)", "max (µs)", "share over 2 ms", "load", "wall (s)"}}
	us := func(p float64) string { return fmt.Sprintf("%.0f", float64(lat.Percentile(p))/1e3) }
	over := 100 - lat.Below(uint64(2*time.Millisecond)+1)
	t.Add(strconv.Itoa(len(lat)), strconv.Itoa(lost), us(50), us(90), us(99), us(99.9), us(100), fmt.Sprintf("%.1f%%", over), load, fmt.Sprintf("%.1f", wall.Seconds()))
	fmt.Printf("### write(2) to the Watcher's report, tracker path\n\n%s\n", t.String())
	if lost > 0 {
		fmt.Printf("%d of %d reports were lost; they count at %v in the distribution.\n", lost, len(lat), e.timeout)
	}
	verdict := "met"
	if lat.Percentile(99) > uint64(2*time.Millisecond) {
		verdict = "missed"
	}
	fmt.Printf("Target (issue 7): p99 ≤ 2 ms: %s (p99 %s µs).\n", verdict, us(99))
	return nil
}

func rate(r lab.Size) string {
	if r == 0 {
		return "unpaced"
	}
	return "at " + r.String() + "/s"
}

// startLoad runs the -load writer in a cgroup of its own until the
// returned function stops it.
func (e experiment) startLoad(ctx context.Context, b *lab.Bench) (stop func(), err error) {
	lc, err := b.Cgroup(nil, "load", lab.CgroupOptions{Limit: 100 << 20})
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// The lab removes the cgroup and the scratch directory at Close;
		// the writer ends there at the latest, killed with its context.
		w := lab.Writer{Bin: b.Writer, File: b.File("reaction-load"), Size: 64 << 30, Chunk: 1 << 20, Rate: uint64(e.loadRate)}
		_, _, _ = w.Run(lctx, lc)
	}()
	return func() { cancel(); wg.Wait() }, nil
}

// await waits up to d for cg on events and returns when it came, on
// CLOCK_MONOTONIC; ok is false if it did not.
func await(ctx context.Context, events <-chan host.Cgroup, cg host.Cgroup, d time.Duration) (at time.Duration, ok bool) {
	deadline := time.After(d)
	for {
		select {
		case got := <-events:
			if got == cg {
				return dirtytrack.MonotonicNow(), true
			}
		case <-deadline:
			return 0, false
		case <-ctx.Done():
			return 0, false
		}
	}
}

// dirtier is experiments/writer -stdin running in the measured cgroup.
type dirtier struct {
	in   io.WriteCloser
	out  *bufio.Scanner
	wait func() error
}

func startDirtier(ctx context.Context, b *lab.Bench, c *lab.Cgroup, file string) (*dirtier, error) {
	cmd := c.Command(ctx, b.Writer, "-file", file, "-stdin")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the writer in %s: %w", c.Path, err)
	}
	d := &dirtier{in: in, out: bufio.NewScanner(out), wait: cmd.Wait}
	if !d.out.Scan() || d.out.Text() != "ready" {
		return nil, errors.Join(fmt.Errorf("the writer in %s did not start: %q", c.Path, d.out.Text()), d.close())
	}
	return d, nil
}

// write has the writer write n bytes and returns when, on
// CLOCK_MONOTONIC, its write(2) began.
func (d *dirtier) write(n uint64) (time.Duration, error) {
	if _, err := fmt.Fprintln(d.in, n); err != nil {
		return 0, fmt.Errorf("writer: %w", err)
	}
	if !d.out.Scan() {
		return 0, fmt.Errorf("writer: no answer: %v", d.out.Err())
	}
	t0, err := strconv.ParseInt(d.out.Text(), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("writer: %w", err)
	}
	return time.Duration(t0), nil
}

// close ends the writer's input and waits for it to exit.
func (d *dirtier) close() error {
	d.in.Close()
	if err := d.wait(); err != nil {
		return fmt.Errorf("writer: %w", err)
	}
	return nil
}
