package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memcgd/memcgd/control"
	"github.com/memcgd/memcgd/host"
)

// readyTimeout bounds how long a started daemon may take to answer on
// its control socket: it recovers its journal and lists the managed
// subtree first (and loads the eBPF dirty tracker). Scaled by slow(): in
// the VM on a loaded host a restart once took 11 s from "memcgd stopped"
// to "memcgd running".
const readyTimeout = 10 * time.Second

// daemon is a `memcgd run` process and the files it works with, all in
// one temporary directory. Stopped and started again, it keeps its
// journal, overrides, socket path and log, as a restarted service does.
type daemon struct {
	t   testing.TB
	bin string

	config, journal, overrides, socket, log string
	listen                                  string   // metrics address, a free loopback port
	flags                                   []string // extra flags of memcgd run
	// join are the cgroup directories the daemon is started in (every
	// hierarchy's), none to leave it in the test's own.
	join []string
	// wrap is a command the daemon is started under, the daemon's command
	// line following wrap's arguments, and attr the attributes (new
	// namespaces) of the process started: the pods of namespace_test.go.
	wrap []string
	attr *syscall.SysProcAttr

	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	err    error         // cmd.Wait's result, once exited is closed
}

// newDaemon prepares a daemon running with the config text cfg. It does
// not start it.
func newDaemon(t testing.TB, cfg string, flags ...string) *daemon {
	t.Helper()
	dir := t.TempDir()
	d := &daemon{
		t: t, bin: memcgdBinary(t),
		config:    filepath.Join(dir, "config.yaml"),
		journal:   filepath.Join(dir, "state", "journal"),
		overrides: filepath.Join(dir, "state", "overrides.json"),
		socket:    filepath.Join(dir, "run", "control.sock"),
		log:       filepath.Join(dir, "memcgd.log"),
		listen:    freePort(t),
		flags:     flags,
	}
	d.setConfig(cfg)
	t.Cleanup(func() {
		if d.running() {
			d.signal(syscall.SIGTERM)
			d.wait(readyTimeout)
		}
		if t.Failed() {
			t.Logf("daemon log (%s):\n%s", d.log, tail(d.logText(), 60))
		}
	})
	return d
}

// managedConfig is a config managing the subtree at under, with no limit
// required, and the defaults given as YAML flow-map entries.
func managedConfig(under host.Cgroup, defaults string) string {
	return fmt.Sprintf("version: 1\nmanage: {under: %s, limited_only: false}\ndefaults: {%s}\n", under, defaults)
}

// setConfig writes the config file the daemon reads at start and on
// SIGHUP.
func (d *daemon) setConfig(cfg string) {
	d.t.Helper()
	if err := os.WriteFile(d.config, []byte(cfg), 0o600); err != nil {
		d.t.Fatal(err)
	}
}

// replaceConfig replaces the config file at once, as kubelet's symlink
// swap and an editor's rename do: written beside it, then renamed over it,
// so that no read finds it half written.
func (d *daemon) replaceConfig(cfg string) {
	d.t.Helper()
	tmp := d.config + ".new"
	if err := os.WriteFile(tmp, []byte(cfg), 0o600); err != nil {
		d.t.Fatal(err)
	}
	if err := os.Rename(tmp, d.config); err != nil {
		d.t.Fatal(err)
	}
}

// freePort returns a loopback address with a port nothing listens on.
func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// start runs the daemon and returns once it answers on its control
// socket, which it opens only after undoing what its journal holds.
func (d *daemon) start() {
	d.t.Helper()
	d.launch()
	d.ready()
}

// launch starts the daemon process, inside the cgroup directories d.join
// when set, and returns at once.
func (d *daemon) launch() {
	d.t.Helper()
	if d.running() {
		d.t.Fatal("daemon: start while running")
	}
	logf, err := os.OpenFile(d.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		d.t.Fatal(err)
	}
	defer logf.Close()
	args := append([]string{"run", "--config", d.config,
		"--journal", d.journal, "--overrides", d.overrides,
		"--socket", d.socket, "--listen", d.listen}, d.flags...)
	cmdline := append(append(append([]string(nil), d.wrap...), d.bin), args...)
	if len(d.join) > 0 {
		// A shell joins the cgroups and executes the daemon: it runs
		// inside them from its first instruction, under the same PID.
		sh := append([]string{"-c", joinScript, "sh"}, d.join...)
		d.cmd = exec.Command("sh", append(append(sh, "--"), cmdline...)...)
	} else {
		d.cmd = exec.Command(cmdline[0], cmdline[1:]...)
	}
	d.cmd.SysProcAttr = d.attr
	d.cmd.Stderr, d.cmd.Stdout = logf, logf
	if err := d.cmd.Start(); err != nil {
		d.t.Fatalf("start memcgd: %v", err)
	}
	exited := make(chan struct{})
	d.exited = exited
	go func(cmd *exec.Cmd) {
		d.err = cmd.Wait()
		close(exited)
	}(d.cmd)
}

// joinScript writes the shell's PID into each directory's cgroup.procs
// given before "--", then executes the rest of its arguments.
const joinScript = `while [ "$1" != -- ]; do echo $$ > "$1/cgroup.procs" || exit 126; shift; done; shift; exec "$@"`

// ready waits for the launched daemon to answer on its control socket.
func (d *daemon) ready() {
	d.t.Helper()
	deadline := time.Now().Add(readyTimeout * slow())
	for {
		if c, err := control.Dial(d.socket); err == nil {
			c.Close()
			return
		}
		if !d.running() {
			d.t.Fatalf("memcgd run exited before answering on %s: %v; log:\n%s", d.socket, d.err, tail(d.logText(), 30))
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("memcgd run: no answer on %s after %v; log:\n%s", d.socket, readyTimeout*slow(), tail(d.logText(), 30))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pid is the running daemon's process id.
func (d *daemon) pid() int { return d.cmd.Process.Pid }

// running reports whether the daemon process has not exited.
func (d *daemon) running() bool {
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

// signal sends sig to the daemon.
func (d *daemon) signal(sig syscall.Signal) {
	d.t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		d.t.Fatalf("signal %v to memcgd: %v", sig, err)
	}
}

// wait waits up to timeout for the daemon to exit and returns its exit
// error (nil for status 0).
func (d *daemon) wait(timeout time.Duration) error {
	d.t.Helper()
	select {
	case <-d.exited:
		return d.err
	case <-time.After(timeout):
		d.t.Fatalf("memcgd did not exit within %v; log:\n%s", timeout, tail(d.logText(), 30))
		return nil
	}
}

// kill ends the daemon with SIGKILL, as a crash does, and reaps it.
func (d *daemon) kill() {
	d.t.Helper()
	d.signal(syscall.SIGKILL)
	err := d.wait(readyTimeout)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		d.t.Fatalf("memcgd after SIGKILL: %v, want killed by SIGKILL", err)
	}
}

// stop ends the daemon with SIGTERM and checks it exits with status 0.
func (d *daemon) stop() {
	d.t.Helper()
	d.signal(syscall.SIGTERM)
	if err := d.wait(readyTimeout); err != nil {
		d.t.Fatalf("memcgd after SIGTERM: %v, want exit status 0; log:\n%s", err, tail(d.logText(), 30))
	}
}

// logText is everything the daemon's runs have logged.
func (d *daemon) logText() string {
	b, err := os.ReadFile(d.log)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		d.t.Fatal(err)
	}
	return string(b)
}

// waitLog waits up to timeout for a log line, written after the log held
// from bytes, that contains every one of words, and returns it.
func (d *daemon) waitLog(from int, timeout time.Duration, words ...string) (string, bool) {
	deadline := time.Now().Add(timeout)
	for {
		text := d.logText()
		if from < len(text) {
			for line := range strings.Lines(text[from:]) {
				if containsAll(line, words) {
					return strings.TrimSpace(line), true
				}
			}
		}
		if time.Now().After(deadline) {
			return "", false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func containsAll(s string, words []string) bool {
	for _, w := range words {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.SplitAfter(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}

// client runs the memcgd command line (stat, get, set) against the
// daemon's socket and returns its standard output and error.
func (d *daemon) client(cred *syscall.Credential, args ...string) (stdout, stderr string, err error) {
	d.t.Helper()
	cmd := exec.Command(d.bin, args...)
	cmd.Dir = "/"
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// stat returns `memcgd stat --json` of cg from the daemon, by field name;
// a field the kernel lacks is absent.
func (d *daemon) stat(cg host.Cgroup) map[string]uint64 {
	d.t.Helper()
	m, err := d.tryStat(cg)
	if err != nil {
		d.t.Fatal(err)
	}
	return m
}

// tryStat is stat, with an error where stat fails the test.
func (d *daemon) tryStat(cg host.Cgroup) (map[string]uint64, error) {
	out, errOut, err := d.client(nil, "stat", "--socket", d.socket, "--json", string(cg))
	if err != nil {
		return nil, fmt.Errorf("memcgd stat %s: %v: %s", cg, err, errOut)
	}
	var reports []struct {
		Cgroup host.Cgroup    `json:"cgroup"`
		Stats  map[string]any `json:"stats"`
	}
	if err := decodeNumbers([]byte(out), &reports); err != nil {
		return nil, fmt.Errorf("memcgd stat %s: %v in %q", cg, err, out)
	}
	if len(reports) != 1 || reports[0].Cgroup != cg {
		return nil, fmt.Errorf("memcgd stat %s: got %q, want that cgroup's report only", cg, out)
	}
	return statValues(reports[0].Stats)
}

// decodeNumbers is json.Unmarshal with numbers kept as json.Number.
func decodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// statValues is a report's stats by name, a flag 1 or 0 as the tests
// compare them; a field the kernel lacks (null) is absent, and so is a
// size with no limit (null too).
func statValues(stats map[string]any) (map[string]uint64, error) {
	m := make(map[string]uint64, len(stats))
	for k, v := range stats {
		switch v := v.(type) {
		case nil:
		case bool:
			m[k] = 0
			if v {
				m[k] = 1
			}
		case json.Number:
			n, err := strconv.ParseUint(string(v), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("stat %s: %q is not a count", k, v)
			}
			m[k] = n
		default:
			return nil, fmt.Errorf("stat %s: %v is neither a number nor a boolean", k, v)
		}
	}
	return m, nil
}

// settings is `memcgd get --json`: the knobs in force, those set by
// `memcgd set`, and the thresholds and watermarks in bytes.
type settings struct {
	// Knobs and Overrides are typed: numbers, "auto", booleans.
	Knobs     map[string]any    `json:"knobs"`
	Overrides map[string]any    `json:"overrides"`
	Bytes     map[string]uint64 `json:"bytes"`
}

// get returns `memcgd get --json` of cg from the daemon.
func (d *daemon) get(cg host.Cgroup) settings {
	d.t.Helper()
	out, errOut, err := d.client(nil, "get", "--socket", d.socket, "--json", string(cg))
	if err != nil {
		d.t.Fatalf("memcgd get %s: %v: %s", cg, err, errOut)
	}
	var s settings
	if err := decodeNumbers([]byte(out), &s); err != nil {
		d.t.Fatalf("memcgd get %s: %v in %q", cg, err, out)
	}
	return s
}

// managedCount returns how many cgroups the daemon reports on.
func (d *daemon) managedCount() (int, error) {
	c, err := control.Dial(d.socket)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	rs, err := c.Stat(d.t.Context(), "")
	return len(rs), err
}
