package sched

import (
	"log/slog"
	"time"

	"github.com/memcgd/memcgd/host"
)

// A dry run (Config.DryRun) observes and decides as the daemon does, but
// hands out no op that changes anything: the Core takes each as done, at
// once, and counts and logs it, so that the statuses, the metrics and the
// log say what the daemon would have done: the counts of its actions,
// with their byte counters at zero, nothing being written or reclaimed
// (the cgroup's dirty pages stay, so that a byte counter would count them
// again at every decision). Its mirror of the throttle
// believes the freezes and paces it decided, so the decisions that follow
// are the ones the daemon would take if the kernel had not reacted.

// Changes reports whether ops of kind k change the host: what a dry run
// does not hand out.
func (k Kind) Changes() bool {
	switch k {
	case Freeze, Thaw, Refreeze, End, Pace, SetPace, Unpace, WriteOut, Flush, Reclaim:
		return true
	}
	return false
}

// dryRun is the result of op as if the host had carried it out.
func (c *Core) dryRun(op Op) Result {
	r := Result{Op: op, At: c.now}
	switch op.Kind {
	case Freeze:
		r.Episode = dryEpisode{}
	case Pace:
		r.Paced = dryEpisode{}
	case WriteOut:
		r.WriteOut = host.WriteOut{Files: 1}
	}
	args := []any{"cgroup", op.Cgroup}
	switch op.Kind {
	case Reclaim:
		args = append(args, "bytes", op.Bytes)
	case Pace, SetPace:
		args = append(args, "quota", op.Quota, "period", op.Period)
	}
	c.log(slog.LevelDebug, "dry run: would "+op.Kind.String(), args...)
	return r
}

// dryEpisode is the freezer and pacing episode of a dry run: it does
// nothing.
type dryEpisode struct{}

func (dryEpisode) Thaw() error                            { return nil }
func (dryEpisode) Refreeze() error                        { return nil }
func (dryEpisode) End() error                             { return nil }
func (dryEpisode) Set(time.Duration, time.Duration) error { return nil }
func (dryEpisode) CPU() (time.Duration, error)            { return 0, nil }
