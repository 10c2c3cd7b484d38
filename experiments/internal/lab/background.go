package lab

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"
)

// Background is a process that runs inside a cgroup beside an
// experiment's workload until told to stop: it prints one line when it is
// ready, runs until its standard input reaches its end, then prints its
// report and exits. Ending by the end of its input, not by a signal, lets
// it report, and also ends it when the lab dies.
type Background struct {
	// Ready is the first line it printed, without its newline.
	Ready string
	// Pid is its process id.
	Pid int

	name    string // the command, for errors
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdout  *bufio.Reader
	stderr  bytes.Buffer
	started time.Time
	// waited is closed once Stop (or the lab's Close) waited for it.
	waited chan struct{}
	err    error
}

// Start starts name with args inside c and waits for its first line of
// output. The lab kills it at Close if Stop was not called.
func (l *Lab) Start(ctx context.Context, c *Cgroup, name string, args ...string) (*Background, error) {
	p := &Background{name: name + " in " + string(c.Path), cmd: c.Command(ctx, name, args...), waited: make(chan struct{})}
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("start %s in %s: %w", name, c.Path, err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start %s in %s: %w", name, c.Path, err)
	}
	p.stdout = bufio.NewReader(out)
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s in %s: %w", name, c.Path, err)
	}
	p.Pid, p.started = p.cmd.Process.Pid, time.Now()
	l.OnClose(func() error {
		select {
		case <-p.waited:
		default:
			_ = p.cmd.Process.Kill()
			_ = p.wait()
		}
		return nil
	})
	line, err := p.stdout.ReadString('\n')
	if err != nil {
		_ = p.cmd.Process.Kill()
		werr := p.wait()
		return nil, fmt.Errorf("start %s in %s: no ready line: %w (%v, stderr %q)", name, c.Path, err, werr, p.stderr.String())
	}
	p.Ready = strings.TrimSuffix(line, "\n")
	return p, nil
}

// Stop closes its standard input and waits for it to exit; it returns what
// it printed after its ready line, and its usage.
func (p *Background) Stop() ([]byte, Usage, error) {
	cerr := p.stdin.Close()
	rest, rerr := io.ReadAll(p.stdout)
	werr := p.wait()
	u := usageOf(p.cmd.ProcessState, time.Since(p.started))
	if err := errors.Join(cerr, rerr, werr); err != nil {
		return rest, u, fmt.Errorf("%s: %w (stderr %q)", p.name, err, p.stderr.String())
	}
	return rest, u, nil
}

// wait waits for the process once and keeps the result.
func (p *Background) wait() error {
	select {
	case <-p.waited:
		return p.err
	default:
	}
	p.err = p.cmd.Wait()
	close(p.waited)
	return p.err
}
