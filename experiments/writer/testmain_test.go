package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain runs the tests as the lab runs the writer, with the Go
// runtime's asynchronous preemption off (lab.Writer sets
// GODEBUG=asyncpreemptoff=1): its SIGURG is a pending signal like a
// freeze's, and a read from /dev/zero or a pipe interrupted by it returns
// short (drivers/char/mem.c, read_iter_zero), which the source counts.
// Without it in the environment the test binary runs itself again with
// it.
func TestMain(m *testing.M) {
	const off = "asyncpreemptoff=1"
	godebug := os.Getenv("GODEBUG")
	if strings.Contains(godebug, off) {
		os.Exit(m.Run())
	}
	if godebug != "" {
		godebug += ","
	}
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), "GODEBUG="+godebug+off)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		if e := (*exec.ExitError)(nil); errors.As(err, &e) {
			os.Exit(e.ExitCode())
		}
		os.Stderr.WriteString("run the tests again with GODEBUG=" + off + ": " + err.Error() + "\n")
		os.Exit(2)
	}
	os.Exit(0)
}
