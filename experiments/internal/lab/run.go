package lab

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Usage is a finished process's wall time and CPU time, from its rusage.
type Usage struct {
	Wall, User, Sys time.Duration
}

// Run runs cmd to completion and returns its stdout and usage. Stderr is
// kept for the error, which the caller wraps with what the command was.
func Run(cmd *exec.Cmd) ([]byte, Usage, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	u := usageOf(cmd.ProcessState, time.Since(start))
	if err != nil {
		return stdout.Bytes(), u, fmt.Errorf("%w (stderr %q)", err, stderr.String())
	}
	return stdout.Bytes(), u, nil
}

// usageOf is a finished process's usage: its rusage, and wall.
func usageOf(ps *os.ProcessState, wall time.Duration) Usage {
	u := Usage{Wall: wall}
	if ps == nil {
		return u
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		u.User = time.Duration(ru.Utime.Nano())
		u.Sys = time.Duration(ru.Stime.Nano())
	}
	return u
}
