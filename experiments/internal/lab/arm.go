package lab

import (
	"context"
	"fmt"
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
	return d, d.Await(ctx, c.Path)
}

// EndArm reads d's counters for c, stops d (SIGTERM, exit status 0) and
// checks that it left c and the lab's Root as it found them. With a nil d
// it returns nil counters.
func (b *Bench) EndArm(ctx context.Context, d *Daemon, c *Cgroup) (map[string]uint64, error) {
	if d == nil {
		return nil, nil
	}
	st, err := d.Stat(ctx, c.Path)
	if err != nil {
		return nil, err
	}
	if err := d.Stop(); err != nil {
		return nil, err
	}
	if err := CheckUntouched(b.Root, c); err != nil {
		return nil, fmt.Errorf("memcgd left a change behind: %w", err)
	}
	return st, nil
}
