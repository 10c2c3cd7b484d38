package agent

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/hostcall"
	"github.com/memcgd/memcgd/sched"
)

// executor carries out a Core's ops: a pool of workers per lane, as many
// as the lane's capacity, so that handing out an op never blocks, and a
// results channel as deep as all of them, so that a worker never blocks
// on a loop that has stopped. The loop goroutine owns the Core and
// inflight; the workers own only the op they carry out.
type executor struct {
	a        *Agent
	core     *sched.Core // loop only
	lanes    [sched.LaneCount]chan sched.Op
	results  chan sched.Result
	workers  sync.WaitGroup
	inflight map[uint64]inflightOp // loop only
	// deadline is what the timer was last set for (ready), loop only.
	deadline time.Time
	// taken and done are the arrays of the results advance and ready
	// hand to the Core, reused: loop only.
	taken, done []sched.Result
}

// inflightOp is an op handed to a worker, for the shutdown report: what
// it names only, as a map keeps an element of this size inline, and a
// whole Op would be allocated per op.
type inflightOp struct {
	kind  sched.Kind
	cg    host.Cgroup
	since time.Time
}

func newExecutor(a *Agent, core *sched.Core) *executor {
	x := &executor{a: a, core: core, inflight: map[uint64]inflightOp{}}
	total := 0
	for l := range x.lanes {
		n := core.Capacity(sched.Lane(l))
		total += n
		x.lanes[l] = make(chan sched.Op, n)
	}
	x.results = make(chan sched.Result, total)
	return x
}

// start starts the workers, which run ops with ctx.
func (x *executor) start(ctx context.Context) {
	for l, ch := range x.lanes {
		for range x.core.Capacity(sched.Lane(l)) {
			x.workers.Add(1)
			go func() {
				defer x.workers.Done()
				for op := range ch {
					x.results <- x.measured(ctx, op)
				}
			}()
		}
	}
}

// ready takes the Core's Ready: publishes the statuses and logs, hands
// the ops to the workers and sets the timer for the next deadline. A
// Watch is carried out on the loop itself (inline): it only sets the
// watcher's thresholds, in memory or a cgroupfs control file, and comes
// with most steps, where a hand-off to a worker and back costs two
// thread wake-ups.
func (x *executor) ready(ctx context.Context, timer *time.Timer) {
	var rd sched.Ready
	for {
		rd = x.core.Ready()
		x.publish(ctx, rd)
		now := time.Now()
		done := x.done[:0]
		for _, op := range rd.Ops {
			if inline(op.Kind) {
				done = append(done, x.measured(ctx, op))
				continue
			}
			x.inflight[op.ID] = inflightOp{op.Kind, op.Cgroup, now}
			x.lanes[op.Kind.Lane()] <- op
		}
		if len(done) == 0 {
			break
		}
		x.core.Advance(time.Now(), done...)
		clear(done) // keeps no result's readings alive
		x.done = done[:0]
	}
	timer.Stop()
	if x.deadline = rd.Deadline; !rd.Deadline.IsZero() {
		timer.Reset(max(time.Until(rd.Deadline), 0))
	}
}

// inline reports whether ops of kind k are carried out on the loop
// (ready).
func inline(k sched.Kind) bool { return k == sched.Watch }

// publish keeps the statuses Ready changed, for Status, and logs its
// records.
func (x *executor) publish(ctx context.Context, rd sched.Ready) {
	a := x.a
	if rd.Scanned {
		a.ready.Store(true)
	}
	if len(rd.Status) > 0 || len(rd.Removed) > 0 {
		a.mu.Lock()
		for _, cg := range rd.Removed {
			delete(a.status, cg)
		}
		for _, s := range rd.Status {
			a.status[s.Cgroup] = s
		}
		a.mu.Unlock()
	}
	h := a.log.Handler()
	for _, r := range rd.Logs {
		if h.Enabled(ctx, r.Level) {
			_ = h.Handle(ctx, r) // a log that fails must not stop the daemon
		}
	}
}

// advance takes a result, and any others waiting.
func (x *executor) advance(r sched.Result) {
	rs := append(x.taken[:0], r)
	for more := true; more; {
		select {
		case r := <-x.results:
			rs = append(rs, r)
		default:
			more = false
		}
	}
	for _, r := range rs {
		delete(x.inflight, r.Op.ID)
	}
	x.core.Advance(time.Now(), rs...)
	clear(rs) // keeps no result's readings alive
	x.taken = rs[:0]
}

// stop ends the Core's work: the episodes are ended (thawed) by their End
// ops, and the calls in flight are waited for, within StopTimeout.
func (x *executor) stop(ctx context.Context) error {
	x.core.Stop(time.Now())
	t := time.NewTimer(x.a.opts.StopTimeout)
	defer t.Stop()
	never := time.NewTimer(time.Hour) // Ready sets no deadline once stopping
	defer never.Stop()
	for {
		rd := x.core.Ready()
		x.publish(ctx, rd)
		for _, op := range rd.Ops {
			x.inflight[op.ID] = inflightOp{op.Kind, op.Cgroup, time.Now()}
			x.lanes[op.Kind.Lane()] <- op
		}
		if rd.Stopped && len(x.inflight) == 0 {
			return nil
		}
		select {
		case r := <-x.results:
			x.advance(r)
		case <-t.C:
			// The workers left behind exit when their calls return; the
			// results channel has room for each.
			x.a.log.Error("stopping with host calls still in flight", "waited", x.a.opts.StopTimeout,
				"calls", x.describeInflight(time.Now()))
			return nil
		}
	}
}

// describeInflight lists the ops in flight, oldest first.
func (x *executor) describeInflight(now time.Time) []string {
	ops := make([]inflightOp, 0, len(x.inflight))
	for _, o := range x.inflight {
		ops = append(ops, o)
	}
	slices.SortFunc(ops, func(a, b inflightOp) int { return a.since.Compare(b.since) })
	out := make([]string, len(ops))
	for i, o := range ops {
		out[i] = fmt.Sprintf("%s %s for %v", o.kind, o.cg, now.Sub(o.since).Round(time.Millisecond))
	}
	return out
}

// close stops handing out ops; idle workers exit.
func (x *executor) close() {
	for _, ch := range x.lanes {
		close(ch)
	}
}

// do carries out one op on the host (hostcall.Do), timing it.
func (a *Agent) do(ctx context.Context, op sched.Op) sched.Result {
	start := time.Now()
	r := hostcall.Do(ctx, a.opts.Host, driver{a}, op)
	r.Took = time.Since(start)
	return r
}

// driver is the Agent's part of hostcall.Driver: its watcher, and what it
// keeps of each cgroup.
type driver struct{ a *Agent }

func (d driver) Watch(cg host.Cgroup, w host.Wake) error {
	if d.a.opts.Watcher == nil {
		return nil
	}
	return d.a.opts.Watcher.Watch(cg, w)
}

func (d driver) Forget(cg host.Cgroup) error { return d.a.forget(cg) }

// forget drops what the daemon keeps of cg, which it no longer manages:
// its watch, the host's resources (the tracker's id, freezer directories
// it made) and its runtime overrides, which a cgroup created again at the
// same path must not inherit.
func (a *Agent) forget(cg host.Cgroup) error {
	if a.opts.Watcher != nil {
		a.opts.Watcher.Unwatch(cg)
	}
	if f, ok := a.opts.Host.(host.Forgetter); ok {
		f.Forget(cg)
	}
	if a.opts.Overrides != nil {
		if err := a.opts.Overrides.Forget(cg); err != nil {
			return fmt.Errorf("forget the overrides of a removed cgroup: %w", err)
		}
	}
	return nil
}
