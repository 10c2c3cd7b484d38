package main

import (
	"context"
	"fmt"
	"time"

	"github.com/memcgd/memcgd/experiments/internal/lab"
)

// sleeper measures whether only the dirtier slows: a thread of the
// writer's own process, so in its memory cgroup (and on v1 in its
// original cpu cgroup), sleeps 1 ms at a time while the writer is slowed
// to -share, and its wake-up lateness is taken per arm.
func (e *env) sleeper(ctx context.Context) error {
	arms := []arm{{name: "sleeper alone (writer idle)"}, {name: "stock (writer unpaced)"}}
	for _, m := range e.mechs {
		for _, per := range []time.Duration{10 * time.Millisecond, 100 * time.Millisecond} {
			q := quotaOf(e.o.share, per)
			arms = append(arms, arm{name: fmt.Sprintf("paced (%s, %v/%v)", m, q, per), mech: m, quota: q, period: per})
		}
	}
	arms = append(arms, arm{name: fmt.Sprintf("frozen (thawed %v of %v)", quotaOf(e.o.share, freezePeriod), freezePeriod),
		freeze: true, period: freezePeriod})
	res := newAgg()
	for run := 0; run < e.b.Runs; run++ {
		for i, a := range arms {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err := e.sleeperArm(ctx, res, a, i == 0); err != nil {
				return err
			}
		}
	}
	t := lab.Table{Header: []string{"arm", "wake-ups", "late p50 (µs)", "p99 (µs)", "max (µs)", "p99 per run", "writer MiB/s", "load1"}}
	for _, a := range res.arms {
		rate := "—"
		if len(res.vals[a]["rate"]) > 0 {
			rate = res.med(a, "rate", "%.0f")
		}
		t.Add(a, res.med(a, "n", "%.0f"), res.med(a, "p50", "%.0f"), res.med(a, "p99", "%.0f"), res.med(a, "max", "%.0f"),
			res.each(a, "p99", "%.0f"), rate, res.med(a, "load", "%.2f"))
	}
	fmt.Printf("### Only the dirtier slows: a 1 ms sleeper beside it\n\nThe sleeper is a thread of the writer's process (its memory cgroup%s); "+
		"each arm runs %v. Lateness is how much longer than 1 ms each nanosleep took. Figures are medians of %d runs.\n\n%s\n",
		map[bool]string{false: ", and its cpu cgroup: only the writer's TID moves", true: ""}[e.v2], e.o.sleepTime, e.b.Runs, t.String())
	return nil
}

// sleeperArm runs one arm of the sleeper measure and adds its figures.
func (e *env) sleeperArm(ctx context.Context, res *agg, a arm, idle bool) error {
	tc, err := e.tenantCgroup("sleeper", nil)
	if err != nil {
		return err
	}
	defer tc.remove()
	cfg := tenantConfig{file: e.b.File("sleeper"), src: srcZero, chunk: 1 << 20, cap: int64(e.o.fileCap), sleeper: true,
		idle: idle, samples: int(e.o.sleepTime/time.Millisecond) * 2}
	p, err := tc.start(ctx, cfg)
	if err != nil {
		return err
	}
	defer p.close()
	end, err := e.slowed(tc, a, p.ready.Writer)
	if err != nil {
		return err
	}
	if err := p.call("stream", nil); err != nil {
		return err
	}
	time.Sleep(e.o.sleepTime)
	if err := end(); err != nil {
		return err
	}
	r, err := p.stop()
	if err != nil {
		return err
	}
	late := make(lab.Series, len(r.Lateness))
	for k, v := range r.Lateness {
		late[k] = uint64(max(v, 0))
	}
	us := func(p float64) float64 { return float64(late.Percentile(p)) / 1e3 }
	res.add(a.name, "n", float64(len(late)))
	res.add(a.name, "p50", us(50))
	res.add(a.name, "p99", us(99))
	res.add(a.name, "max", us(100))
	res.add(a.name, "load", load1f())
	if r.Elapsed > 0 {
		res.add(a.name, "rate", lab.MiB(r.Bytes)/(float64(r.Elapsed)/1e9))
	}
	return nil
}
