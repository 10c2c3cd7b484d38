package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/internal/daemonproc"
)

// stopTimeout bounds how long a daemon may take to exit after SIGTERM,
// and readyTimeout how long it may take to be ready and to observe a
// cgroup.
const (
	stopTimeout  = 20 * time.Second
	readyTimeout = 30 * time.Second
)

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

// Daemon is a memcgd run as a subprocess (internal/daemonproc), with its
// journal, overrides and control socket in a directory of its own and its
// metrics on a free loopback port. Socket, Listen and Log are its control
// socket, metrics address and log; Stat its report on a cgroup.
type Daemon struct {
	*daemonproc.Daemon

	startup time.Duration // set by StartArm
	// busyFrom and busyTo bracket the workload (BusyStart, BusyEnd).
	busyFrom, busyTo busyMark
}

// StartDaemon starts memcgd and returns once it is ready: its control
// socket answers and its /readyz says its first scan is done. The lab
// stops it at Close if the caller has not.
func (l *Lab) StartDaemon(ctx context.Context, o DaemonOptions) (*Daemon, error) {
	dir, err := os.MkdirTemp(l.tmp, "memcgd-")
	if err != nil {
		return nil, fmt.Errorf("start memcgd: %w", err)
	}
	p, err := daemonproc.New(o.Bin, dir, o.Config)
	if err != nil {
		return nil, fmt.Errorf("start memcgd: %w", err)
	}
	p.Args, p.Wrap = o.Args, niceWrap(o.Nice)
	// A session of its own, as systemd gives every service: with
	// autogroups (kernel/sched/autogroup.c) a session is a task group, and
	// a daemon in the experiment's own would take its CPU share from the
	// writer's group (docs/lab/2026-11-30-results.md).
	p.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := p.Launch(); err != nil {
		return nil, fmt.Errorf("start memcgd: %w", err)
	}
	d := &Daemon{Daemon: p}
	l.OnClose(func() error {
		if !d.Running() {
			return nil
		}
		return d.Stop()
	})
	if err := setAutogroupNice(d.PID(), o.Nice); err != nil {
		return nil, fmt.Errorf("start memcgd: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := d.Daemon.Await(ctx); err != nil {
		return nil, fmt.Errorf("start memcgd: %w", err)
	}
	return d, nil
}

// niceWrap returns the command that runs the daemon at nice value n, set
// before it starts so that every thread of the Go runtime has it: nice(1)
// where it is installed, else (the test VM's busybox has no nice applet)
// sh and renice(1), which set the shell's own value and exec the daemon.
// nice(1) adds n to the caller's value and renice sets it: the same for a
// caller at 0, as the experiments run. n 0 runs the daemon as the caller.
func niceWrap(n int) []string {
	if n == 0 {
		return nil
	}
	if _, err := exec.LookPath("nice"); err == nil {
		return []string{"nice", "-n", strconv.Itoa(n)}
	}
	// renice's priority without -n is the absolute value in both
	// util-linux and busybox; -n is an increment in busybox.
	return []string{"sh", "-c", `renice "$0" -p $$ >/dev/null && exec "$@"`, strconv.Itoa(n)}
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

// Await waits until the daemon manages cg (has stepped it at least once),
// so that a run does not start before the daemon looks at its cgroup.
func (d *Daemon) Await(ctx context.Context, cg host.Cgroup) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		f, err := d.Stat(ctx, cg)
		if err == nil && f["limit"] != 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("memcgd has not observed %s after %v: %v", cg, readyTimeout, err)
		}
		select {
		case <-d.Exited():
			return fmt.Errorf("memcgd exited: %v\n%s", d.ExitErr(), d.Tail(20))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop sends SIGTERM and waits for the daemon to exit. Anything but a
// clean exit with status 0 within stopTimeout is an error (after which it
// is killed).
func (d *Daemon) Stop() error { return d.Daemon.Stop(stopTimeout) }

// Usage is the daemon's CPU time and lifetime; zero until it exited.
func (d *Daemon) Usage() Usage {
	ps, life := d.ProcessState()
	if ps == nil {
		return Usage{}
	}
	return usageOf(ps, life)
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
