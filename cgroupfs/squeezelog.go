package cgroupfs

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/memcgd/memcgd/host"
)

// squeezeLogEvery is how often a cgroup's v1 limit squeezes may log at
// info (squeezeLog).
const squeezeLogEvery = time.Minute

// squeezeLog spaces out the info lines of each cgroup's v1 limit squeezes.
// act.Reclaim logs one line per squeeze, once the limit is back; a writer
// that charges faster than the userspace kswapd reclaims is squeezed
// hundreds of times a second, and a line each at info would flood the
// journal an operator reads. So a cgroup's first squeeze, and its first
// squeeze squeezeLogEvery or more after its last line at info, log at info,
// with how many squeezes logged at debug in between; the others at debug.
// Warnings and errors are never lowered; memcgd_cgroup_reclaimed_bytes_total
// counts every squeeze's reclaim.
type squeezeLog struct {
	mu   sync.Mutex
	last map[host.Cgroup]squeezeTally
}

// squeezeTally is one cgroup's: when its last info line was, and how many
// squeezes have logged at debug since.
type squeezeTally struct {
	at    time.Time
	quiet int
}

// logger returns the logger for a squeeze of cg beginning at now: log
// itself, with the count of quiet squeezes, when an info line is due, else
// log with its info lines lowered to debug. A nil log stays nil.
func (q *squeezeLog) logger(log *slog.Logger, cg host.Cgroup, now time.Time) *slog.Logger {
	if log == nil {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.last == nil {
		q.last = make(map[host.Cgroup]squeezeTally)
	}
	t, seen := q.last[cg]
	if seen && now.Sub(t.at) < squeezeLogEvery {
		t.quiet++
		q.last[cg] = t
		return slog.New(debugOnly{log.Handler()})
	}
	q.last[cg] = squeezeTally{at: now}
	if !seen {
		return log
	}
	return log.With("squeezes_at_debug_since", t.quiet)
}

// forget drops cg's tally.
func (q *squeezeLog) forget(cg host.Cgroup) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.last, cg)
}

// debugOnly is a handler that lowers info records to debug.
type debugOnly struct{ h slog.Handler }

func (d debugOnly) lower(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}

func (d debugOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return d.h.Enabled(ctx, d.lower(l))
}

func (d debugOnly) Handle(ctx context.Context, r slog.Record) error {
	r.Level = d.lower(r.Level)
	return d.h.Handle(ctx, r)
}

func (d debugOnly) WithAttrs(as []slog.Attr) slog.Handler { return debugOnly{d.h.WithAttrs(as)} }

func (d debugOnly) WithGroup(name string) slog.Handler { return debugOnly{d.h.WithGroup(name)} }
