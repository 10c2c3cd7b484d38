package lab

import (
	"context"
	"fmt"
	"time"
)

// An experiment compares two arms, without and with memcgd, on the same
// workload. Order alternates which runs first between repetitions, so that
// a drift of the machine (another tenant's I/O, a warming disk cache) does
// not always favour the same arm.

// Order is the order of the arms in repetition run (from 1): false is
// without memcgd, true with it. Odd runs start without.
func Order(run int) []bool {
	if run%2 == 0 {
		return []bool{true, false}
	}
	return []bool{false, true}
}

// FirstArm names the arm that runs first in repetition run.
func FirstArm(run int) string {
	if Order(run)[0] {
		return "with memcgd first"
	}
	return "without memcgd first"
}

// StartArm starts memcgd with config for an arm with it, and waits until
// it has observed c; without, it does nothing and returns nil.
func (b *Bench) StartArm(ctx context.Context, with bool, config string, c *Cgroup) (*Daemon, error) {
	if !with {
		return nil, nil
	}
	d, err := b.Daemon(ctx, config)
	if err != nil {
		return nil, err
	}
	if err := d.Await(ctx, c.Path); err != nil {
		return nil, err
	}
	d.startup = time.Since(d.started)
	return d, nil
}

// DaemonResult is what a daemon reported and used in one arm.
type DaemonResult struct {
	// Fields are its `memcgd stat` fields for the arm's cgroup; nil
	// without a daemon.
	Fields map[string]uint64
	// Usage is the daemon's own CPU time (its rusage) and lifetime.
	Usage Usage
	// Startup is how long it took from its start until it had observed
	// the arm's cgroup.
	Startup time.Duration
}

// EndArm reads d's counters for c, stops d (SIGTERM, exit status 0) and
// checks that it left c and the lab's Root as it found them. With a nil d
// it returns the zero DaemonResult.
func (b *Bench) EndArm(ctx context.Context, d *Daemon, c *Cgroup) (DaemonResult, error) {
	if d == nil {
		return DaemonResult{}, nil
	}
	st, err := d.Stat(ctx, c.Path)
	if err != nil {
		return DaemonResult{}, err
	}
	if err := d.Stop(); err != nil {
		return DaemonResult{}, err
	}
	if err := CheckUntouched(b.Root, c); err != nil {
		return DaemonResult{}, fmt.Errorf("memcgd left a change behind: %w", err)
	}
	return DaemonResult{Fields: st, Usage: d.Usage(), Startup: d.startup}, nil
}
