package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// hogScript spins on the CPU until killed.
const hogScript = "while :; do :; done"

// Hogs are busy loops standing for the other tenants of a host whose
// CPUs are contended: the writer, the daemon and the kernel's flushers
// then wait for a CPU as they would on a busy host. Each runs in a session
// of its own, so that with autogroups (kernel/sched/autogroup.c) each
// weighs on the scheduler as a tenant in a CPU cgroup of its own would,
// not as one more task of the experiment's own group.
type Hogs struct {
	c    *Cgroup
	cmds []*exec.Cmd
}

// StartHogs starts n busy loops in a cgroup of their own beneath the lab's
// root, with no memory limit (memcgd leaves it alone: the experiments
// manage limited cgroups only). The lab's Close kills them, by PID, and
// removes the cgroup.
func (l *Lab) StartHogs(ctx context.Context, n int) (*Hogs, error) {
	c, err := l.Cgroup(nil, "cpu-hogs", CgroupOptions{})
	if err != nil {
		return nil, err
	}
	h := &Hogs{c: c}
	l.OnClose(h.stop)
	for range n {
		cmd := c.Command(ctx, "sh", "-c", hogScript)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return h, fmt.Errorf("cpu hog: %w", err)
		}
		h.cmds = append(h.cmds, cmd)
	}
	return h, nil
}

// stop kills the loops it started, by PID, and waits for them.
func (h *Hogs) stop() error {
	var errs []error
	for _, cmd := range h.cmds {
		if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, fmt.Errorf("stop cpu hog %d: %w", cmd.Process.Pid, err))
		}
		_ = cmd.Wait() // killed: its status says so
	}
	h.cmds = nil
	return errors.Join(errs...)
}
