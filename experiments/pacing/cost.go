package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/memcgd/memcgd/experiments/internal/lab"
)

// cost times the pacer's operations while the writer runs: a thread moved
// into the pace group and back out (running, and throttled), the quota
// changed, and the whole set-up and release of a pace group.
func (e *env) cost(ctx context.Context) error {
	for _, mech := range e.mechs {
		if err := e.costOf(ctx, mech); err != nil {
			return err
		}
	}
	return nil
}

type timings map[string]lab.Series

func (t timings) add(op string, d time.Duration) { t[op] = append(t[op], uint64(d)) }

func (e *env) costOf(ctx context.Context, mech string) error {
	tc, err := e.tenantCgroup("cost-"+mech, nil)
	if err != nil {
		return err
	}
	defer tc.remove()
	p, err := tc.start(ctx, tenantConfig{file: e.b.File("cost-" + mech), src: srcZero, chunk: 1 << 20, cap: int64(e.o.fileCap)})
	if err != nil {
		return err
	}
	defer p.close()
	if err := p.call("stream", nil); err != nil {
		return err
	}
	tid := strconv.Itoa(p.ready.Writer)
	tm := timings{}
	var order []string
	op := func(name string, d time.Duration, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if _, ok := tm[name]; !ok {
			order = append(order, name)
		}
		tm.add(name, d)
		return nil
	}

	// Whole set-ups and releases.
	for i := 0; i < max(e.o.costN/10, 5); i++ {
		pc, err := tc.pacer(mech)
		if err != nil {
			return err
		}
		t0 := time.Now()
		err = pc.Pace([]int{p.ready.Writer}, 20*time.Millisecond, 100*time.Millisecond)
		if err := op("set up: make the group, set the quota, move the writer in", time.Since(t0), err); err != nil {
			return err
		}
		time.Sleep(20 * time.Millisecond)
		t0 = time.Now()
		err = pc.Release()
		if err := op("release: move every thread back, remove the group (and -cpu)", time.Since(t0), err); err != nil {
			return err
		}
	}

	pc, err := tc.pacer(mech)
	if err != nil {
		return err
	}
	defer pc.Release()
	if err := pc.Pace([]int{p.ready.Writer}, 20*time.Millisecond, 100*time.Millisecond); err != nil {
		return err
	}
	pace := tc.paceDir(mech)
	threads, quotaFile := "tasks", "cpu.cfs_quota_us"
	quotas := [2]string{"20000", "-1"}
	if e.v2 {
		threads, quotaFile = "cgroup.threads", "cpu.max"
		quotas = [2]string{"20000 100000", "max 100000"}
	}
	// Moves and quota changes back to back (2 ms apart), and far apart
	// (50 ms): a move takes cgroup_threadgroup_rwsem for writing, whose
	// rcu_sync waits for an RCU grace period unless a writer came
	// shortly before (kernel/rcu/sync.c).
	moves := func(label string, gap time.Duration, n int) error {
		for i := 0; i < n && ctx.Err() == nil; i++ {
			time.Sleep(gap)
			d, err := timedWrite(filepath.Join(pace, quotaFile), quotas[i%2])
			if err := op("change the quota ("+quotaFile+"), "+label, d, err); err != nil {
				return err
			}
			if mech == mechLeaf {
				continue
			}
			time.Sleep(gap)
			d, err = timedWrite(filepath.Join(tc.cpu, threads), tid)
			if err := op("move the writer out ("+threads+" of the tenant's cgroup), "+label, d, err); err != nil {
				return err
			}
			time.Sleep(gap)
			d, err = timedWrite(filepath.Join(pace, threads), tid)
			if err := op("move the writer in ("+threads+" of the pace group), "+label, d, err); err != nil {
				return err
			}
		}
		return nil
	}
	if err := moves("2 ms apart", 2*time.Millisecond, e.o.costN); err != nil {
		return err
	}
	if err := moves("50 ms apart", 50*time.Millisecond, max(e.o.costN/4, 10)); err != nil {
		return err
	}
	if mech != mechLeaf {
		// Throttled: 1 ms of every 100 ms, so the writer is off the CPU
		// when it is moved out nearly every time.
		if err := pc.Pace(nil, time.Millisecond, 100*time.Millisecond); err != nil {
			return err
		}
		for _, gap := range []time.Duration{2 * time.Millisecond, 50 * time.Millisecond} {
			label := fmt.Sprintf("%v apart", gap)
			for i := 0; i < max(e.o.costN/4, 10) && ctx.Err() == nil; i++ {
				time.Sleep(gap)
				w0, _ := readThreadIO(p.ready.PID, p.ready.Writer)
				d, err := timedWrite(filepath.Join(tc.cpu, threads), tid)
				if err := op("move the writer out while throttled, "+label, d, err); err != nil {
					return err
				}
				// How soon it writes again once out of the throttled group.
				t0 := time.Now()
				for {
					w, _ := readThreadIO(p.ready.PID, p.ready.Writer)
					if w.WChar != w0.WChar || time.Since(t0) > time.Second {
						break
					}
					time.Sleep(20 * time.Microsecond)
				}
				if err := op("from that move's end to the writer's next write(2) returning, "+label, time.Since(t0), nil); err != nil {
					return err
				}
				time.Sleep(gap)
				d, err = timedWrite(filepath.Join(pace, threads), tid)
				if err := op("move the writer back in (throttled group), "+label, d, err); err != nil {
					return err
				}
			}
		}
	}
	if err := pc.Release(); err != nil {
		return err
	}
	if _, err := p.stop(); err != nil {
		return err
	}
	t := lab.Table{Header: []string{"operation", "n", "p50 (µs)", "p99 (µs)", "max (µs)"}}
	for _, name := range order {
		s := tm[name]
		us := func(p float64) string { return fmt.Sprintf("%.0f", float64(s.Percentile(p))/1e3) }
		t.Add(name, strconv.Itoa(len(s)), us(50), us(99), us(100))
	}
	fmt.Printf("### Cost of the pacer's operations, mechanism %s\n\nWhile the writer of the law streams; load1 at the end %s.\n\n%s\n",
		mech, load1(), t.String())
	return nil
}
