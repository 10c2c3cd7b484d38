package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/memcgd/memcgd/control"
)

const topHelp = `Show the cgroups the running daemon manages, live, in the manner of
systemd-cgtop: one row per cgroup, the busiest writer first (sorted by
dirtying rate, then by dirty+writeback), with

  STATE            what the daemon does to it now (idle, active, paced,
                   throttled, frozen) and for how long
  DIRTY+WB/LIMIT   dirty plus writeback against its dirty limit (dirty_thresh)
  DIRTYING         the rate its tasks dirty pages, as the throttle estimates it
  WRITING          the rate its dirty pages are written (write bandwidth), as
                   the kernel's wb_update_write_bandwidth estimates it: from
                   100 MiB/s (its INIT_BW) until the cgroup has written
  USAGE/LIMIT      memory charged against its hard limit
  PACES, FREEZES   pacing episodes and freezes begun since the last refresh

under a header with the daemon's dirty-tracking path (tracker or poll) and
whether it runs dry (memcgd run --dry-run: the states and counts are what it
would do). Sizes are in binary units (K, M, G: KiB, MiB, GiB).

On a terminal, top redraws the screen every -d and q (or Ctrl-C) quits; the
terminal is restored on exit, on SIGINT and on SIGTERM. With -b, or when
standard output is not a terminal, it prints each refresh after the last,
with no terminal control, for scripts and logs; -n stops after that many
refreshes.`

func newTopCmd() *cobra.Command {
	var socket string
	var delay time.Duration
	var iterations int
	var batch bool
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Show the managed cgroups live: state, dirty against limit, rates, throttle",
		Long:  topHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if delay <= 0 {
				return usagef("-d/--delay: invalid value %v: allowed a positive duration such as 500ms or 2s", delay)
			}
			if iterations < 0 {
				return usagef("-n/--iterations: invalid value %d: allowed 0 (no end) or more", iterations)
			}
			t := &topper{socket: socket, delay: delay, iterations: iterations, out: cmd.OutOrStdout()}
			if !batch {
				t.tty = ttyOf(cmd.OutOrStdout(), cmd.InOrStdin())
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return t.run(ctx)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&socket, "socket", control.DefaultSocket, "the daemon's control socket, a `PATH`")
	fl.DurationVarP(&delay, "delay", "d", time.Second, "refresh every `INTERVAL`")
	fl.IntVarP(&iterations, "iterations", "n", 0, "stop after `N` refreshes (0: no end)")
	fl.BoolVarP(&batch, "batch", "b", false, "batch mode: no terminal control, each refresh printed after the last")
	return cmd
}

// tty is the terminal top draws on: its output descriptor, and its input
// (keys), in raw mode while top runs.
type tty struct {
	out int
	in  *os.File
}

// ttyOf returns the terminal behind out and in, or nil when either is not
// one (batch mode).
func ttyOf(out io.Writer, in io.Reader) *tty {
	of, ok1 := out.(*os.File)
	inf, ok2 := in.(*os.File)
	if !ok1 || !ok2 || !term.IsTerminal(int(of.Fd())) || !term.IsTerminal(int(inf.Fd())) {
		return nil
	}
	return &tty{out: int(of.Fd()), in: inf}
}

// Terminal control: the alternate screen (what was on the terminal comes
// back on exit), the cursor hidden, home and clear.
const (
	enterScreen = "\x1b[?1049h\x1b[?25l"
	leaveScreen = "\x1b[?25h\x1b[?1049l"
	redraw      = "\x1b[H\x1b[2J"
)

// topper is `memcgd top`'s loop.
type topper struct {
	socket     string
	delay      time.Duration
	iterations int
	out        io.Writer
	tty        *tty // nil in batch mode
}

func (t *topper) run(ctx context.Context) error {
	if t.tty == nil {
		return t.loop(ctx)
	}
	in := int(t.tty.in.Fd())
	old, err := term.MakeRaw(in)
	if err != nil {
		return fmt.Errorf("top: terminal raw mode: %w", err)
	}
	// Restored on every way out: a return, q, SIGINT, SIGTERM (the
	// context). A panic too.
	defer term.Restore(in, old)
	fmt.Fprint(t.out, enterScreen)
	defer fmt.Fprint(t.out, leaveScreen)
	ctx, quit := context.WithCancel(ctx)
	defer quit()
	keys := make(chan byte, 1)
	go readKeys(t.tty.in, keys)
	go func() {
		for k := range keys {
			// q, or Ctrl-C and Ctrl-D, which raw mode delivers as bytes.
			if k == 'q' || k == 'Q' || k == 3 || k == 4 {
				quit()
				return
			}
		}
	}()
	return t.loop(ctx)
}

// readKeys sends the bytes read from in to keys, until in fails.
func readKeys(in io.Reader, keys chan<- byte) {
	r := bufio.NewReader(in)
	for {
		b, err := r.ReadByte()
		if err != nil {
			close(keys)
			return
		}
		keys <- b
	}
}

// loop refreshes until ctx ends or the iterations are done.
func (t *topper) loop(ctx context.Context) error {
	var prev []control.Report
	tick := time.NewTicker(t.delay)
	defer tick.Stop()
	for i := 0; t.iterations == 0 || i < t.iterations; i++ {
		cur, err := t.stat(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && t.tty == nil {
			return fmt.Errorf("top: %w", err)
		}
		t.draw(cur, prev, time.Now(), err, i)
		if err == nil {
			prev = cur
		}
		if t.iterations != 0 && i == t.iterations-1 {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
	return nil
}

// stat asks the daemon for every cgroup's report, on a new connection:
// the daemon drops one that idles past control.ReadTimeout.
func (t *topper) stat(ctx context.Context) ([]control.Report, error) {
	c, err := control.Dial(t.socket)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Stat(ctx, "")
}

// draw prints one refresh: in batch mode after the last, a blank line
// between; on the terminal over the last, cut to its size, with the
// error of a refresh that failed in place of the table.
func (t *topper) draw(cur, prev []control.Report, now time.Time, err error, i int) {
	if t.tty == nil {
		var b strings.Builder
		if i > 0 {
			b.WriteString("\n")
		}
		for _, l := range renderTop(cur, prev, now, 0) {
			b.WriteString(l + "\n")
		}
		io.WriteString(t.out, b.String())
		return
	}
	width, height, werr := term.GetSize(t.tty.out)
	if werr != nil {
		width, height = 80, 24
	}
	lines := renderTop(cur, prev, now, width)
	if err != nil {
		lines = []string{lines[0], "", cut(fmt.Sprintf("no answer from the daemon: %v", err), width)}
	}
	lines = append(lines[:min(len(lines), height-1)], cut("q quits", width))
	// Raw mode leaves "\n" a bare line feed: each line ends "\r\n".
	io.WriteString(t.out, redraw+strings.Join(lines, "\r\n"))
}

// cut shortens s to n bytes.
func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
