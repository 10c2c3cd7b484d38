package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/internal/daemonproc"
)

// readyTimeout bounds how long a started daemon may take to be ready:
// it recovers its journal and lists the managed subtree first (and loads
// the eBPF dirty tracker). Scaled by slow(): in the VM on a loaded host a
// restart once took 11 s from "memcgd stopped" to "memcgd running".
const readyTimeout = 10 * time.Second

// daemon is a `memcgd run` process (internal/daemonproc) in a test: its
// files in the test's temporary directory, its metrics on a free loopback
// port, and methods that fail the test where daemonproc returns an error.
// Before a launch a test may set Join (the cgroup directories it starts
// in, every hierarchy's), Wrap and SysProcAttr (the pods of
// namespace_test.go) and Args.
type daemon struct {
	*daemonproc.Daemon
	t testing.TB
}

// newDaemon prepares a daemon running with the config text cfg and the
// extra flags of memcgd run. It does not start it; cleanup stops it.
func newDaemon(t testing.TB, cfg string, flags ...string) *daemon {
	t.Helper()
	p, err := daemonproc.New(memcgdBinary(t), t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.Args = flags
	d := &daemon{Daemon: p, t: t}
	t.Cleanup(func() {
		if d.Running() {
			_ = d.Stop(readyTimeout)
		}
		if t.Failed() {
			t.Logf("daemon log (%s):\n%s", d.Log, tail(d.logText(), 60))
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
	if err := d.SetConfig(cfg); err != nil {
		d.t.Fatal(err)
	}
}

// replaceConfig replaces the config file at once (ReplaceConfig).
func (d *daemon) replaceConfig(cfg string) {
	d.t.Helper()
	if err := d.ReplaceConfig(cfg); err != nil {
		d.t.Fatal(err)
	}
}

// start runs the daemon and returns once it is ready: its control socket
// answers, which it opens only after undoing what its journal holds, and
// its /readyz says its first scan is done.
func (d *daemon) start() {
	d.t.Helper()
	d.launch()
	d.ready()
}

// launch starts the daemon process and returns at once.
func (d *daemon) launch() {
	d.t.Helper()
	if err := d.Launch(); err != nil {
		d.t.Fatal(err)
	}
}

// ready waits for the launched daemon to be ready.
func (d *daemon) ready() {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout*slow())
	defer cancel()
	if err := d.Await(ctx); err != nil {
		d.t.Fatal(err)
	}
}

// signal sends sig to the daemon.
func (d *daemon) signal(sig syscall.Signal) {
	d.t.Helper()
	if err := d.Signal(sig); err != nil {
		d.t.Fatal(err)
	}
}

// wait waits up to timeout for the daemon to exit and returns its exit
// error (nil for status 0); still running then fails the test.
func (d *daemon) wait(timeout time.Duration) error {
	d.t.Helper()
	err := d.Wait(timeout)
	if errors.Is(err, daemonproc.ErrRunning) {
		d.t.Fatalf("%v; log:\n%s", err, tail(d.logText(), 30))
	}
	return err
}

// kill ends the daemon with SIGKILL, as a crash does, and reaps it.
func (d *daemon) kill() {
	d.t.Helper()
	if err := d.Kill(readyTimeout); err != nil {
		d.t.Fatal(err)
	}
}

// stop ends the daemon with SIGTERM and checks it exits with status 0.
func (d *daemon) stop() {
	d.t.Helper()
	if err := d.Stop(readyTimeout); err != nil {
		d.t.Fatal(err)
	}
}

// logText is everything the daemon's runs have logged.
func (d *daemon) logText() string {
	text, err := d.LogText()
	if err != nil {
		d.t.Fatal(err)
	}
	return text
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
func tail(s string, n int) string { return daemonproc.Tail(s, n) }

// client runs the memcgd command line (stat, get, set) against the
// daemon's socket and returns its standard output and error.
func (d *daemon) client(cred *syscall.Credential, args ...string) (stdout, stderr string, err error) {
	d.t.Helper()
	cmd := exec.Command(d.Bin, args...)
	cmd.Dir = "/"
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// stat returns the daemon's report on cg, by field name (daemonproc.Stat:
// a field the kernel lacks is absent).
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
	return d.Stat(context.Background(), cg)
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
	out, errOut, err := d.client(nil, "get", "--socket", d.Socket, "--json", string(cg))
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
	return d.Count(context.Background())
}
