// Package daemonproc runs `memcgd run` as a process, for the tests that
// exercise the daemon on the real kernel (test/daemon) and the experiments
// that measure it (experiments/internal/lab): it starts the binary with a
// config and files of its own, waits until it is ready, probes it over its
// control socket and its metrics endpoint, and stops it with SIGTERM,
// checking the exit status, or kills it. Signals go to the process it
// started only, by PID.
package daemonproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/memcgd/memcgd/internal/sandbox"
)

// ErrRunning reports that the daemon had not exited when a wait ended.
var ErrRunning = errors.New("memcgd still running")

// Daemon is a `memcgd run` process and the files it works with, all in one
// directory. Stopped and launched again, it keeps its journal, overrides,
// socket path and log (appended to), as a restarted service does.
//
// The exported fields other than the files are read at each Launch; set
// them before. A Daemon is used from one goroutine, but for Exited.
type Daemon struct {
	// Bin is the memcgd binary.
	Bin string
	// Config, Journal, Overrides, Socket and Log are its files: the
	// config it reads at start and on SIGHUP, --journal, --overrides,
	// --socket, and where its stdout and stderr go.
	Config, Journal, Overrides, Socket, Log string
	// Listen is its metrics address (--listen), a loopback port that was
	// free at New.
	Listen string
	// Args are extra flags of memcgd run, after those New sets (a later
	// flag wins).
	Args []string
	// Join are cgroup directories (one per hierarchy) the daemon starts
	// inside, from its first instruction (sandbox.JoinArgv); none leaves
	// it in the caller's.
	Join []string
	// Wrap is a command the daemon runs under, its command line following
	// Wrap's arguments: nice(1), a namespace launcher. The process
	// started, whose PID signals go to, is Wrap's, which must execute the
	// daemon (so that the PID stays the daemon's).
	Wrap []string
	// SysProcAttr are the attributes of the process started (a session
	// of its own, new namespaces).
	SysProcAttr *syscall.SysProcAttr

	cmd     *exec.Cmd
	started time.Time
	// exited is closed once cmd has been waited for; err is cmd.Wait's
	// result and ended when that returned, both written before exited is
	// closed.
	exited chan struct{}
	err    error
	ended  time.Time
}

// New prepares a daemon whose files are in dir and whose config is cfg.
// It does not start it.
func New(bin, dir, cfg string) (*Daemon, error) {
	listen, err := FreePort()
	if err != nil {
		return nil, fmt.Errorf("memcgd: %w", err)
	}
	d := &Daemon{
		Bin:       bin,
		Config:    filepath.Join(dir, "config.yaml"),
		Journal:   filepath.Join(dir, "state", "journal"),
		Overrides: filepath.Join(dir, "state", "overrides.json"),
		Socket:    filepath.Join(dir, "run", "control.sock"),
		Log:       filepath.Join(dir, "memcgd.log"),
		Listen:    listen,
	}
	if err := d.SetConfig(cfg); err != nil {
		return nil, err
	}
	return d, nil
}

// FreePort returns a loopback address whose port nothing listened on a
// moment ago.
func FreePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// SetConfig writes the config file the daemon reads at start and on
// SIGHUP.
func (d *Daemon) SetConfig(cfg string) error {
	if err := os.WriteFile(d.Config, []byte(cfg), 0o600); err != nil {
		return fmt.Errorf("memcgd config: %w", err)
	}
	return nil
}

// ReplaceConfig replaces the config file at once, as kubelet's symlink
// swap and an editor's rename do: written beside it, then renamed over it,
// so that no read finds it half written.
func (d *Daemon) ReplaceConfig(cfg string) error {
	tmp := d.Config + ".new"
	if err := os.WriteFile(tmp, []byte(cfg), 0o600); err != nil {
		return fmt.Errorf("memcgd config: %w", err)
	}
	if err := os.Rename(tmp, d.Config); err != nil {
		return fmt.Errorf("memcgd config: %w", err)
	}
	return nil
}

// Argv is the command line Launch runs: the join shell (with Join), Wrap,
// then memcgd run with the daemon's files and Args.
func (d *Daemon) Argv() []string {
	run := append([]string{d.Bin, "run", "--config", d.Config,
		"--journal", d.Journal, "--overrides", d.Overrides,
		"--socket", d.Socket, "--listen", d.Listen}, d.Args...)
	argv := append(append([]string(nil), d.Wrap...), run...)
	if len(d.Join) > 0 {
		argv = sandbox.JoinArgv(d.Join, 0, argv...)
	}
	return argv
}

// Launch starts the daemon and returns at once; Await waits until it is
// ready.
func (d *Daemon) Launch() error {
	if d.Running() {
		return errors.New("launch memcgd: already running")
	}
	logf, err := os.OpenFile(d.Log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("launch memcgd: %w", err)
	}
	defer logf.Close()
	argv := d.Argv()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = d.SysProcAttr
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("launch memcgd: %w", err)
	}
	d.cmd, d.started, d.err = cmd, time.Now(), nil
	exited := make(chan struct{})
	d.exited = exited
	go func() {
		err := cmd.Wait()
		d.err, d.ended = err, time.Now()
		close(exited)
	}()
	return nil
}

// Start launches the daemon and waits until it is ready (Await).
func (d *Daemon) Start(ctx context.Context) error {
	if err := d.Launch(); err != nil {
		return err
	}
	return d.Await(ctx)
}

// PID is the process id of the daemon last launched.
func (d *Daemon) PID() int { return d.cmd.Process.Pid }

// Started is when the daemon last launched was started.
func (d *Daemon) Started() time.Time { return d.started }

// Exited is closed once the daemon last launched has exited and been
// reaped; nil before the first Launch.
func (d *Daemon) Exited() <-chan struct{} { return d.exited }

// Running reports whether the daemon was launched and has not exited.
func (d *Daemon) Running() bool {
	if d.exited == nil {
		return false
	}
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// ExitErr is how the daemon exited: nil for status 0, an *exec.ExitError
// otherwise. It is ErrRunning until it has exited.
func (d *Daemon) ExitErr() error {
	if d.exited == nil {
		return errors.New("memcgd not launched")
	}
	select {
	case <-d.exited:
		return d.err
	default:
		return ErrRunning
	}
}

// ProcessState is the exited daemon's state (its rusage), and Lifetime
// the time from its start to its exit; nil and 0 until it has exited.
func (d *Daemon) ProcessState() (*os.ProcessState, time.Duration) {
	if d.cmd == nil || errors.Is(d.ExitErr(), ErrRunning) {
		return nil, 0
	}
	return d.cmd.ProcessState, d.ended.Sub(d.started)
}

// Signal sends sig to the daemon's process. A daemon already exited is
// no error.
func (d *Daemon) Signal(sig syscall.Signal) error {
	if d.cmd == nil {
		return errors.New("signal memcgd: not launched")
	}
	if err := d.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %v to memcgd (pid %d): %w", sig, d.PID(), err)
	}
	return nil
}

// Wait waits up to timeout for the daemon to exit and returns ExitErr: nil
// for status 0, an *exec.ExitError, or an error wrapping ErrRunning.
func (d *Daemon) Wait(timeout time.Duration) error {
	if d.exited == nil {
		return errors.New("memcgd not launched")
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-d.exited:
		return d.err
	case <-t.C:
		return fmt.Errorf("memcgd (pid %d) after %v: %w", d.PID(), timeout, ErrRunning)
	}
}

// Stop ends the daemon with SIGTERM and checks that it exits with status
// 0 within timeout. A daemon still running then is killed (SIGKILL) and
// reaped, and that is an error too; every error carries the end of the
// log.
func (d *Daemon) Stop(timeout time.Duration) error {
	if err := d.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop memcgd: %w", err)
	}
	err := d.Wait(timeout)
	if errors.Is(err, ErrRunning) {
		_ = d.Signal(syscall.SIGKILL)
		<-d.exited
		return fmt.Errorf("stop memcgd: %w after SIGTERM; killed\n%s", err, d.Tail(30))
	}
	if err != nil {
		return fmt.Errorf("stop memcgd: after SIGTERM %w, want exit status 0\n%s", err, d.Tail(30))
	}
	return nil
}

// Kill ends the daemon with SIGKILL, as a crash does, and checks that it
// was killed by that signal within timeout.
func (d *Daemon) Kill(timeout time.Duration) error {
	if err := d.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill memcgd: %w", err)
	}
	err := d.Wait(timeout)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		return fmt.Errorf("kill memcgd: %v, want killed by SIGKILL", err)
	}
	return nil
}

// LogText is everything the daemon's runs have logged, "" before the
// first.
func (d *Daemon) LogText() (string, error) {
	b, err := os.ReadFile(d.Log)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("memcgd log: %w", err)
	}
	return string(b), nil
}

// Tail is the last n lines of the log, headed by its path, for error
// messages.
func (d *Daemon) Tail(n int) string {
	text, err := d.LogText()
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("memcgd log (%s):\n%s", d.Log, Tail(text, n))
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.SplitAfter(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}
