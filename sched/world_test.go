package sched

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/policy"
	"github.com/memcgd/memcgd/state"
)

const mib = 1 << 20

var t0 = time.Unix(1_000_000, 0)

// world is a host the tests drive the Core against, by hand: each op is
// carried out at once, against cgroups whose state the test sets, and
// logged, so that a test states what the Core asked for.
type world struct {
	// yield is every write-out's host.WriteOut.Yielded.
	yield  bool
	t      testing.TB
	c      *Core
	now    time.Time
	stats  map[host.Cgroup]memcg.Stat
	order  []host.Cgroup
	frozen map[host.Cgroup]bool
	// freezeErr, if set, is what Freeze returns for a cgroup.
	freezeErr map[host.Cgroup]error
	// hold, when set for a kind, keeps its ops in flight until released.
	hold    map[Kind]bool
	held    []Op
	ops     []Op // every op handed out
	logs    []slog.Record
	status  map[host.Cgroup]string
	reclaim func(cg host.Cgroup, n uint64) (uint64, error)
	flush   func(cg host.Cgroup) error
	watches map[host.Cgroup]host.Wake
	scanned bool
	// handed are the statuses Ready handed out, each with its value
	// then.
	handed []handedStatus
	// paced holds each cgroup's pace in force; paceErr what Pace
	// returns; cpu the CPU time its paced tasks used, and throttled the
	// time its pace held them, which Unpace reports.
	paced     map[host.Cgroup]policy.Pacing
	paceErr   map[host.Cgroup]error
	cpu       map[host.Cgroup]time.Duration
	throttled map[host.Cgroup]time.Duration
}

type pacedEpisode struct {
	w  *world
	cg host.Cgroup
}

func (e *pacedEpisode) Set(q, p time.Duration) error {
	if err := e.w.paceErr[e.cg]; err != nil {
		return err
	}
	e.w.paced[e.cg] = policy.Pacing{Quota: q, Period: p}
	return nil
}
func (e *pacedEpisode) CPU() (time.Duration, error) { return e.w.cpu[e.cg], nil }
func (e *pacedEpisode) End() error                  { delete(e.w.paced, e.cg); return nil }

type episode struct {
	w  *world
	cg host.Cgroup
}

func (e *episode) Thaw() error     { e.w.frozen[e.cg] = false; return nil }
func (e *episode) Refreeze() error { e.w.frozen[e.cg] = true; return nil }
func (e *episode) End() error      { e.w.frozen[e.cg] = false; return nil }

// root is an unlimited root.
var root = memcg.Stat{Limit: memcg.NoLimit}

// newWorld returns a world of the cgroups given, parents first, and a
// Core on it with cfg (Policy defaults to config.Default()).
func newWorld(t testing.TB, cfg Config, cgs ...any) *world {
	w := &world{t: t, now: t0, stats: map[host.Cgroup]memcg.Stat{}, frozen: map[host.Cgroup]bool{},
		freezeErr: map[host.Cgroup]error{}, hold: map[Kind]bool{}, watches: map[host.Cgroup]host.Wake{},
		paced: map[host.Cgroup]policy.Pacing{}, paceErr: map[host.Cgroup]error{}, cpu: map[host.Cgroup]time.Duration{},
		throttled: map[host.Cgroup]time.Duration{}}
	for i := 0; i < len(cgs); i += 2 {
		cg := host.Cgroup(cgs[i].(string))
		w.stats[cg] = cgs[i+1].(memcg.Stat)
		w.order = append(w.order, cg)
	}
	if cfg.Policy == nil {
		cfg.Policy = config.Default()
	}
	if cfg.Log == nil {
		cfg.Log = slog.LevelDebug
	}
	w.c = New(cfg, w.now)
	return w
}

// set changes cg's state.
func (w *world) set(cg host.Cgroup, f func(*memcg.Stat)) {
	s := w.stats[cg]
	f(&s)
	w.stats[cg] = s
}

// do carries out op.
func (w *world) do(op Op) Result {
	r := Result{Op: op, At: w.now}
	switch op.Kind {
	case List:
		r.Cgroups = slices.Clone(w.order)
	case Observe, Refresh:
		for _, p := range op.Read {
			s, ok := w.stats[p]
			if !ok {
				r.Err = fmt.Errorf("read %s: %w", p, host.ErrVanished)
				return r
			}
			r.Stats = append(r.Stats, s)
		}
		if op.Paced != nil {
			r.PacedCPU, _ = op.Paced.CPU()
			if op.Held {
				r.PacedThrottled = w.throttled[op.Cgroup]
			}
		}
		if op.Dirtied {
			c := w.stats[op.Cgroup].Counters
			r.Dirtied = host.DirtyCounts{Dirtied: c.DirtiedBytes, HasCancelled: c.HasCancelled, Cancelled: c.CancelledBytes}
			r.HasDirtied = c.HasDirtied
		}
	case Freeze:
		if err := w.freezeErr[op.Cgroup]; err != nil {
			r.Err = err
			return r
		}
		w.frozen[op.Cgroup] = true
		r.Episode = &episode{w, op.Cgroup}
	case Thaw:
		r.Err = op.Episode.Thaw()
	case Refreeze:
		r.Err = op.Episode.Refreeze()
	case End:
		r.Err = op.Episode.End()
	case Pace:
		if err := w.paceErr[op.Cgroup]; err != nil {
			r.Err = err
			return r
		}
		w.paced[op.Cgroup] = policy.Pacing{Quota: op.Quota, Period: op.Period}
		r.Paced = &pacedEpisode{w, op.Cgroup}
	case SetPace:
		r.Err = op.Paced.Set(op.Quota, op.Period)
	case Unpace:
		r.PacedThrottled = w.throttled[op.Cgroup]
		r.Err = op.Paced.End()
	case WriteOut:
		r.WriteOut = host.WriteOut{Files: 1, Bytes: w.stats[op.Cgroup].Dirty, Yielded: w.yield}
	case Flush:
		if w.flush != nil {
			r.Err = w.flush(op.Cgroup)
		}
	case Reclaim:
		if w.reclaim != nil {
			r.Reclaimed, r.Err = w.reclaim(op.Cgroup, op.Bytes)
		} else {
			r.Reclaimed = op.Bytes
		}
	case Watch:
		w.watches[op.Cgroup] = op.Wake
	case Forget:
		delete(w.watches, op.Cgroup)
	}
	return r
}

// settle carries out every op the Core hands out, until it has none.
func (w *world) settle() {
	w.t.Helper()
	for range 10000 {
		rd := w.c.Ready()
		w.take(rd)
		if len(rd.Ops) == 0 {
			return
		}
		var rs []Result
		for _, op := range rd.Ops {
			w.ops = append(w.ops, op)
			if w.hold[op.Kind] {
				w.held = append(w.held, op)
				continue
			}
			rs = append(rs, w.do(op))
		}
		w.c.Advance(w.now, rs...)
	}
	w.t.Fatal("the Core never settled")
}

// handedStatus is a status a Ready handed out, and its value then.
type handedStatus struct {
	p    *state.Status
	then state.Status
}

// take keeps what a Ready says besides its ops.
func (w *world) take(rd Ready) {
	w.logs = append(w.logs, rd.Logs...)
	w.scanned = w.scanned || rd.Scanned
	for _, s := range rd.Status {
		w.handed = append(w.handed, handedStatus{s, *s})
	}
}

// release carries out the held ops of kind k.
func (w *world) release(k Kind) {
	var rs []Result
	kept := w.held[:0]
	for _, op := range w.held {
		if op.Kind == k {
			rs = append(rs, w.do(op))
		} else {
			kept = append(kept, op)
		}
	}
	w.held = kept
	w.c.Advance(w.now, rs...)
	w.settle()
}

// advance moves time forward by d, firing the Core's timers as they come.
func (w *world) advance(d time.Duration) {
	w.t.Helper()
	end := w.now.Add(d)
	w.settle()
	for {
		dl := w.c.deadline()
		if dl.IsZero() || dl.After(end) {
			break
		}
		if dl.After(w.now) {
			w.now = dl
		}
		w.c.Tick(w.now)
		w.settle()
	}
	w.now = end
	w.c.Tick(w.now)
	w.settle()
}

// count returns how many ops of kind k on cg were handed out.
func (w *world) count(k Kind, cg host.Cgroup) int {
	n := 0
	for _, op := range w.ops {
		if op.Kind == k && op.Cgroup == cg {
			n++
		}
	}
	return n
}

// opsSince returns the kinds of the ops on cg handed out from the i-th on.
func (w *world) opsSince(i int, cg host.Cgroup) []string {
	var out []string
	for _, op := range w.ops[i:] {
		if op.Cgroup == cg {
			out = append(out, op.Kind.String())
		}
	}
	return out
}

// logged returns the messages of the records logged at level.
func (w *world) logged(level slog.Level, substr string) int {
	n := 0
	for _, r := range w.logs {
		if r.Level == level && strings.Contains(r.Message, substr) {
			n++
		}
	}
	return n
}

// statusOf returns cg's status in the Core.
func (w *world) statusOf(cg host.Cgroup) (s stateStatus, ok bool) {
	for _, st := range w.c.Status() {
		if st.Cgroup == cg {
			return st, true
		}
	}
	return s, false
}

var errBusy = errors.New("frozen by someone else")
