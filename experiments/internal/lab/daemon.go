package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/memcgd/memcgd/control"
	"github.com/memcgd/memcgd/host"
)

// stopTimeout bounds how long a daemon may take to exit after SIGTERM.
const stopTimeout = 20 * time.Second

// DaemonOptions say how to run `memcgd run`.
type DaemonOptions struct {
	// Bin is the memcgd binary.
	Bin string
	// Config is the YAML config. Its manage.under should be the lab's
	// Root, so that the daemon touches nothing else.
	Config string
	// Args are extra flags of `memcgd run`, such as --active-interval.
	Args []string
	// Nice is the nice value to run it at, through nice(1), so that
	// every thread of the Go runtime has it, and that of its autogroup
	// (setAutogroupNice); 0 runs it as the caller.
	Nice int
}

// DeployNice is the nice value deploy/memcgd.service runs the daemon at
// (Nice=): the experiments measure the daemon as deployed. A test in
// package lab checks the two agree. Its autogroup's nice stands for the
// unit's CPUWeight= (DeployCPUWeight): weight 9548 for nice -10
// (kernel/sched/core.c, sched_prio_to_weight), about 10,240 for
// CPUWeight=1000 against the 1024 of a tenant's group at its default.
const DeployNice = -10

// DeployCPUWeight is deploy/memcgd.service's CPUWeight=, which
// DeployNice's autogroup stands for.
const DeployCPUWeight = 1000

// Daemon is a memcgd run as a subprocess, with its journal, overrides and
// control socket in a directory of its own and its metrics on a free
// loopback port.
type Daemon struct {
	// Socket is its control socket; Listen its metrics address.
	Socket, Listen string
	// Log is the file its stderr goes to.
	Log string

	cmd     *exec.Cmd
	started time.Time
	startup time.Duration // set by StartArm
	// busyFrom and busyTo bracket the workload (BusyStart, BusyEnd).
	busyFrom, busyTo busyMark
	exited           chan struct{}
	err              error // Wait's, once exited is closed
	usage            Usage // once exited is closed
}

// StartDaemon starts memcgd and returns once its control socket answers
// and its metrics endpoint serves. The lab stops it at Close if the
// caller has not.
func (l *Lab) StartDaemon(ctx context.Context, o DaemonOptions) (*Daemon, error) {
	dir, err := os.MkdirTemp(l.tmp, "memcgd-")
	if err != nil {
		return nil, fmt.Errorf("start memcgd: %w", err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(o.Config), 0o600); err != nil {
		return nil, fmt.Errorf("start memcgd: %w", err)
	}
	listen, err := freeLoopbackPort()
	if err != nil {
		return nil, fmt.Errorf("start memcgd: %w", err)
	}
	d := &Daemon{
		Socket: filepath.Join(dir, "control.sock"),
		Listen: listen,
		Log:    filepath.Join(dir, "memcgd.log"),
		exited: make(chan struct{}),
	}
	logf, err := os.Create(d.Log)
	if err != nil {
		return nil, fmt.Errorf("start memcgd: %w", err)
	}
	defer logf.Close()
	args := append([]string{"run", "--config", cfg,
		"--journal", filepath.Join(dir, "journal"),
		"--overrides", filepath.Join(dir, "overrides.json"),
		"--socket", d.Socket,
		"--listen", d.Listen,
	}, o.Args...)
	d.cmd = niceCommand(o.Nice, o.Bin, args)
	// A session of its own, as systemd gives every service: with
	// autogroups (kernel/sched/autogroup.c) a session is a task group, and
	// a daemon in the experiment's own would take its CPU share from the
	// writer's group. At nice -10 there it left the writer on a contended
	// host 10 % of a CPU: writer CPU wait 2.6-6.1 s against 0.7 s in the
	// stock arm, throughput 0.20-0.49 × stock (E1 unpaced beside two busy
	// test processes, 1 Dec 2026, docs/lab/2026-11-30-results.md).
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start memcgd: %w", err)
	}
	if err := setAutogroupNice(d.cmd.Process.Pid, o.Nice); err != nil {
		_ = d.cmd.Process.Kill()
		return nil, fmt.Errorf("start memcgd: %w", err)
	}
	d.started = time.Now()
	go func() {
		d.err = d.cmd.Wait()
		d.usage = usageOf(d.cmd.ProcessState, time.Since(d.started))
		close(d.exited)
	}()
	l.OnClose(func() error {
		select {
		case <-d.exited:
			return nil
		default:
			return d.Stop()
		}
	})
	if err := d.await(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// niceCommand returns the command that runs bin with args at nice value
// n, set before bin starts so that every thread of the Go runtime has it:
// through nice(1) where it is installed, else (the test VM's busybox has
// no nice applet) through sh and renice(1), which set the shell's own
// value and exec bin. nice(1) adds n to the caller's value and renice sets
// it: the same for a caller at 0, as the experiments run. n 0 runs bin as
// the caller.
func niceCommand(n int, bin string, args []string) *exec.Cmd {
	if n == 0 {
		return exec.Command(bin, args...)
	}
	if _, err := exec.LookPath("nice"); err == nil {
		return exec.Command("nice", append([]string{"-n", strconv.Itoa(n), bin}, args...)...)
	}
	// renice's priority without -n is the absolute value in both
	// util-linux and busybox; -n is an increment in busybox.
	script := `renice "$0" -p $$ >/dev/null && exec "$@"`
	return exec.Command("sh", append([]string{"-c", script, strconv.Itoa(n), bin}, args...)...)
}

// setAutogroupNice sets the nice value of the autogroup pid leads
// (/proc/PID/autogroup, kernel/sched/autogroup.c
// proc_sched_autogroup_set_nice). A task's own nice value weighs only
// against the tasks of its task group (sched(7)): beside tenants in
// groups of their own, the group's weight is the daemon's. A kernel
// without autogroups has no such file, and the task's nice value weighs
// against every task of the root group; nothing is set then.
func setAutogroupNice(pid, n int) error {
	p := fmt.Sprintf("/proc/%d/autogroup", pid)
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := os.WriteFile(p, []byte(strconv.Itoa(n)), 0); err != nil {
		return fmt.Errorf("autogroup nice %d: %w", n, err)
	}
	return nil
}

// freeLoopbackPort returns a loopback address whose port was free a
// moment ago.
func freeLoopbackPort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// await waits until the daemon answers on its socket and its metrics
// endpoint, or exits.
func (d *Daemon) await(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := d.ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-d.exited:
			return fmt.Errorf("memcgd exited at start: %v\n%s", d.err, d.tail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("memcgd not ready after 30 s: %w\n%s", err, d.tail())
		}
	}
}

func (d *Daemon) ready(ctx context.Context) error {
	c, err := control.Dial(d.Socket)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Stat(ctx, ""); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.Listen+"/metrics", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return nil
}

// Stat returns the daemon's `memcgd stat` fields for cg that it knows,
// by name: the seeds' counters (kswapd_steal, pgoutrun, ...) and its own
// (writeout_targeted, writeout_flush, throttle_pauses, ...).
func (d *Daemon) Stat(ctx context.Context, cg host.Cgroup) (map[string]uint64, error) {
	c, err := control.Dial(d.Socket)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	reports, err := c.Stat(ctx, cg)
	if err != nil {
		return nil, fmt.Errorf("memcgd stat %s: %w", cg, err)
	}
	out := map[string]uint64{}
	for _, r := range reports {
		if r.Cgroup != cg {
			continue
		}
		for _, f := range r.Fields {
			if f.Known {
				out[f.Name] = f.Value
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("memcgd stat %s: no report for the cgroup", cg)
	}
	return out, nil
}

// Await waits until the daemon manages cg (has stepped it at least once),
// so that a run does not start before the daemon looks at its cgroup.
func (d *Daemon) Await(ctx context.Context, cg host.Cgroup) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		f, err := d.Stat(ctx, cg)
		if err == nil && f["limit"] != 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("memcgd has not observed %s after 30 s: %v", cg, err)
		}
		select {
		case <-d.exited:
			return fmt.Errorf("memcgd exited: %v\n%s", d.err, d.tail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop sends SIGTERM and waits for the daemon to exit. Anything but a
// clean exit with status 0 within stopTimeout is an error (after which it
// is killed).
func (d *Daemon) Stop() error {
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop memcgd: %w", err)
	}
	select {
	case <-d.exited:
	case <-time.After(stopTimeout):
		_ = d.cmd.Process.Kill()
		<-d.exited
		return fmt.Errorf("stop memcgd: still running %v after SIGTERM; killed\n%s", stopTimeout, d.tail())
	}
	if d.err != nil {
		return fmt.Errorf("stop memcgd: %w\n%s", d.err, d.tail())
	}
	return nil
}

// Usage is the daemon's CPU time and lifetime; zero until it exited.
func (d *Daemon) Usage() Usage {
	select {
	case <-d.exited:
		return d.usage
	default:
		return Usage{}
	}
}

// tail returns the end of the daemon's log, for error messages.
func (d *Daemon) tail() string {
	b, err := os.ReadFile(d.Log)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return "memcgd log (" + d.Log + "):\n" + strings.Join(lines, "\n")
}

// CheckUntouched verifies that the cgroups are as the lab left them after
// a daemon stopped: the limit the lab set (none lowered by a squeeze left
// behind), on v2 no memory.high (memcgd's throttle) left set, and not
// frozen in either freezer.
func CheckUntouched(cgs ...*Cgroup) error {
	var errs []error
	check := func(dir, file, want string) {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			errs = append(errs, err)
			return
		}
		if got := strings.TrimSpace(string(b)); got != want {
			errs = append(errs, fmt.Errorf("%s: %s is %s, want %s", dir, file, got, want))
		}
	}
	for _, c := range cgs {
		check(c.Dir, c.limitFile, c.limit)
		if c.v2 {
			check(c.Dir, "memory.high", "max")
		}
		if c.Freezer != "" {
			check(c.Freezer, "freezer.state", "THAWED")
		}
		if c.Unified != "" {
			check(c.Unified, "cgroup.freeze", "0")
		}
	}
	return errors.Join(errs...)
}
