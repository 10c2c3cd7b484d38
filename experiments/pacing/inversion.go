package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/memcgd/memcgd/experiments/internal/lab"
)

// inversion looks for priority inversion through the filesystem: a
// neighbour in a cgroup of its own appends 4 KiB and fdatasyncs on the
// same ext4 filesystem (victim.go) while the writer dirties -share of a
// CPU's worth, paced by CFS bandwidth at each of -inv-periods. Before
// 6.18 a throttled cfs_rq is dequeued whole, so a writer throttled while
// it holds a jbd2 handle stalls every commit until its next period; since
// 6.18 a throttled task runs until it returns to user space
// (kernel/sched/fair.c throttle_cfs_rq_work, queued with TWA_RESUME).
// Each paced arm has a control: the same writer pacing itself to the rate
// the paced arm reached by sleeping in user space between writes, so that
// the difference is the throttle's, not the dirty rate's.
func (e *env) inversion(ctx context.Context) error {
	vc, err := e.b.Cgroup(nil, "victim", lab.CgroupOptions{})
	if err != nil {
		return err
	}
	res := newAgg()
	runArm := func(name string, a arm, rate float64, writer bool) (float64, error) {
		if err := lab.DropCaches(); err != nil {
			return 0, err
		}
		var p *proc
		var tc *tcg
		end := func() error { return nil }
		if writer {
			if tc, err = e.tenantCgroup("inv-writer", nil); err != nil {
				return 0, err
			}
			defer tc.remove()
			if p, err = tc.start(ctx, tenantConfig{file: e.b.File("inv-writer"), src: srcNone, chunk: 1 << 20, cap: int64(e.o.invCap), rate: rate}); err != nil {
				return 0, err
			}
			defer p.close()
			if end, err = e.slowed(tc, a, p.ready.Writer); err != nil {
				return 0, err
			}
			if err := p.call("stream", nil); err != nil {
				return 0, err
			}
			time.Sleep(500 * time.Millisecond)
		}
		sync, err := e.runVictim(ctx, vc)
		if err != nil {
			return 0, err
		}
		var wrate float64
		if writer {
			if err := end(); err != nil {
				return 0, err
			}
			r, err := p.stop()
			if err != nil {
				return 0, err
			}
			wrate = float64(r.Bytes) / (float64(r.Elapsed) / 1e9)
			res.add(name, "rate", lab.MiB(uint64(wrate)))
		}
		msf := func(p float64) float64 { return float64(sync.Percentile(p)) / 1e6 }
		res.add(name, "n", float64(len(sync)))
		res.add(name, "p50", msf(50))
		res.add(name, "p99", msf(99))
		res.add(name, "p999", msf(99.9))
		res.add(name, "max", msf(100))
		res.add(name, "over", 100-sync.Below(uint64(20*time.Millisecond)))
		res.add(name, "load", load1f())
		return wrate, nil
	}
	for run := 0; run < e.b.Runs && ctx.Err() == nil; run++ {
		if _, err := runArm("none", arm{}, 0, false); err != nil {
			return err
		}
		if _, err := runArm("unpaced", arm{}, 0, true); err != nil {
			return err
		}
		for _, per := range e.o.invPeriods {
			q := quotaOf(e.o.share, per)
			var rate float64
			for i, m := range e.mechs {
				r, err := runArm(fmt.Sprintf("paced, %s %v/%v", m, q, per), arm{mech: m, quota: q, period: per}, 0, true)
				if err != nil {
					return err
				}
				if i == 0 {
					rate = r
				}
			}
			if _, err := runArm(fmt.Sprintf("self-paced to the rate of %s %v/%v, sleeping in user space", e.mechs[0], q, per), arm{}, rate, true); err != nil {
				return err
			}
		}
		fa := arm{freeze: true, period: freezePeriod}
		if _, err := runArm(fmt.Sprintf("frozen, thawed %v of %v", quotaOf(e.o.share, freezePeriod), freezePeriod), fa, 0, true); err != nil {
			return err
		}
	}
	t := lab.Table{Header: []string{"writer", "writer MiB/s", "fdatasyncs", "p50 (ms)", "p99 (ms)", "p99.9 (ms)", "max (ms)", "share ≥ 20 ms", "p99 per run", "max per run", "load1"}}
	for _, a := range res.arms {
		rate := "—"
		if len(res.vals[a]["rate"]) > 0 {
			rate = res.med(a, "rate", "%.0f")
		}
		t.Add(a, rate, res.med(a, "n", "%.0f"), res.med(a, "p50", "%.2f"), res.med(a, "p99", "%.2f"), res.med(a, "p999", "%.2f"),
			res.med(a, "max", "%.1f"), res.med(a, "over", "%.2f%%"), res.each(a, "p99", "%.1f"), res.each(a, "max", "%.0f"), res.med(a, "load", "%.2f"))
	}
	if err := e.b.Remove(vc); err != nil {
		return err
	}
	fmt.Printf("### Priority inversion: a neighbour's 4 KiB append + fdatasync on the same filesystem\n\n"+
		"The writer write(2)s 1 MiB buffers (its file truncated at %s), slowed to %.0f%% of a CPU; the neighbour runs %v per arm "+
		"in a memory cgroup of its own; caches are synced and dropped before each arm. Figures are medians of %d runs (arms in this order in each).\n\n%s\n",
		e.o.invCap.String(), e.o.share*100, e.o.invTime, e.b.Runs, t.String())
	return nil
}

// runVictim runs the neighbour in c for -inv-time and returns its
// fdatasync latencies.
func (e *env) runVictim(ctx context.Context, c *lab.Cgroup) (lab.Series, error) {
	cmd := c.Command(ctx, e.exe, "victim", "-file", e.b.File("victim"), "-duration", e.o.invTime.String())
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer cmd.Wait() //nolint:errcheck // its status is checked below when it matters
	rd := bufio.NewReader(out)
	if _, err := rd.ReadBytes('\n'); err != nil {
		return nil, fmt.Errorf("victim: %w (%s)", err, stderr.String())
	}
	if _, err := io.WriteString(in, "go\n"); err != nil {
		return nil, err
	}
	line, err := rd.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("victim: %w (%s)", err, stderr.String())
	}
	in.Close()
	var r victimResult
	if err := json.Unmarshal(line, &r); err != nil {
		return nil, fmt.Errorf("victim: %w", err)
	}
	s := make(lab.Series, len(r.Sync))
	for i, v := range r.Sync {
		s[i] = uint64(v)
	}
	return s, nil
}
