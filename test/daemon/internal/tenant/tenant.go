// Package tenant is the hostile tenant of test/daemon's abuse test: code
// that runs as an unprivileged user inside a cgroup memcgd manages and
// tries to make the root daemon open a device, block, storm the disk or
// OOM-kill it. The test binary runs it by executing itself (see Env);
// each load is a function of its own file.
//
// A tenant process waits for one byte on GateFD before it starts, so that
// the test can first move it into its cgroup, and reports on stdout one
// line "ready ..." once its load runs. It exits after its duration, or
// when killed.
package tenant

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// Env is the environment variable that turns the test binary into a
// tenant: its value is the load's name, its arguments follow as
// command-line arguments.
const Env = "MEMCGD_ABUSE_TENANT"

// Descriptors the test passes to a tenant (exec.Cmd.ExtraFiles).
const (
	// GateFD is a pipe's read end: the tenant starts once it reads a byte.
	GateFD = 3
	// DeviceFD is an O_PATH descriptor of a character device the tenant
	// could not open itself (Flip).
	DeviceFD = 4
	// FIFOFD is an O_PATH descriptor of a FIFO (Flip).
	FIFOFD = 5
)

// Main runs the load named load with args and returns the exit status.
func Main(load string, args []string) int {
	if err := run(load, args); err != nil {
		fmt.Fprintf(os.Stderr, "tenant %s: %v\n", load, err)
		return 1
	}
	return 0
}

func run(load string, args []string) error {
	if err := awaitGate(); err != nil {
		return err
	}
	switch load {
	case "storm":
		o, err := parseStorm(args)
		if err != nil {
			return err
		}
		return Storm(o)
	case "flip":
		o, err := parseFlip(args)
		if err != nil {
			return err
		}
		return Flip(o)
	}
	return fmt.Errorf("unknown load %q: want storm or flip", load)
}

// awaitGate reads one byte from GateFD and closes it.
func awaitGate() error {
	gate := os.NewFile(GateFD, "gate")
	defer gate.Close()
	var b [1]byte
	if _, err := io.ReadFull(gate, b[:]); err != nil {
		return fmt.Errorf("wait for the test to start the load: %w", err)
	}
	return nil
}

// ready tells the test that the load runs.
func ready(format string, args ...any) {
	fmt.Printf("ready "+format+"\n", args...)
}

// argument parsing: each load takes fixed positional arguments.

func wantArgs(args []string, names ...string) error {
	if len(args) != len(names) {
		return fmt.Errorf("got %d arguments %q, want %d: %v", len(args), args, len(names), names)
	}
	return nil
}

func parseUint(name, s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %q: want a decimal number of bytes", name, s)
	}
	return n, nil
}

func parseDuration(name, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s %q: want a positive duration such as 15s", name, s)
	}
	return d, nil
}
