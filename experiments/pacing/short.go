package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/memcgd/memcgd/experiments/internal/lab"
)

// freezePeriod is the freezer arm's cycle: memcgd holds a freeze for at
// most 200 ms at a time; 100 ms is the middle of its range.
const freezePeriod = 100 * time.Millisecond

// arm is one way of slowing the writer.
type arm struct {
	name   string
	mech   string // a pacer's, "" for none
	freeze bool
	quota  time.Duration
	period time.Duration
}

// slowArms are the ways the writer is slowed to -share: each mechanism at
// a 10 ms period, and the freezer thawed for the share of each 10 ms and
// of each 100 ms (the more often it freezes, the more reads it catches).
func (e *env) slowArms(withStock bool) []arm {
	var arms []arm
	if withStock {
		arms = append(arms, arm{name: "stock"})
	}
	for _, m := range e.mechs {
		per := 10 * time.Millisecond
		arms = append(arms, arm{name: fmt.Sprintf("paced (%s, %v/%v)", m, quotaOf(e.o.share, per), per), mech: m,
			quota: quotaOf(e.o.share, per), period: per})
	}
	for _, per := range []time.Duration{10 * time.Millisecond, freezePeriod} {
		arms = append(arms, arm{name: fmt.Sprintf("frozen (thawed %v of %v)", quotaOf(e.o.share, per), per), freeze: true, period: per})
	}
	return arms
}

func quotaOf(share float64, period time.Duration) time.Duration {
	return max(time.Duration(share*float64(period)).Round(10*time.Microsecond), time.Millisecond)
}

// slowed applies a to the tenant's writer (tid) and returns what ends it.
func (e *env) slowed(tc *tcg, a arm, tid int) (func() error, error) {
	switch {
	case a.mech != "":
		pc, err := tc.pacer(a.mech)
		if err != nil {
			return nil, err
		}
		if err := pc.Pace([]int{tid}, a.quota, a.period); err != nil {
			return nil, err
		}
		return pc.Release, nil
	case a.freeze:
		f, err := tc.freezer()
		if err != nil {
			return nil, err
		}
		f.Start(e.o.share, a.period)
		return f.Stop, nil
	}
	return func() error { return nil }, nil
}

// short counts short reads: the writer reading 1 MiB buffers from
// /dev/zero, and from a pipe a feeder thread keeps full, -short-runs runs
// of -short-time per arm; and dd's partial records.
func (e *env) short(ctx context.Context) error {
	t := lab.Table{Header: []string{"source", "arm", "runs", "runs with a short read", "short reads", "reads", "MiB/s (median of runs)", "load1"}}
	for _, src := range []string{srcZero, srcPipe, "dd"} {
		for _, a := range e.slowArms(true) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			tc, err := e.tenantCgroup("short", nil)
			if err != nil {
				return err
			}
			var runsShort, shorts, reads int
			var rates []float64
			for range e.o.shortRuns {
				var sh, rd int
				var rate float64
				if src == "dd" {
					sh, rd, rate, err = e.ddRun(ctx, tc, a)
				} else {
					sh, rd, rate, err = e.shortRun(ctx, tc, a, src)
				}
				if err != nil {
					return fmt.Errorf("%s, %s: %w", src, a.name, err)
				}
				if sh > 0 {
					runsShort++
				}
				shorts, reads, rates = shorts+sh, reads+rd, append(rates, rate)
			}
			if err := tc.remove(); err != nil {
				return err
			}
			name := map[string]string{srcZero: "/dev/zero", srcPipe: "pipe", "dd": "dd if=/dev/zero bs=1M"}[src]
			t.Add(name, a.name, strconv.Itoa(e.o.shortRuns), strconv.Itoa(runsShort), strconv.Itoa(shorts), strconv.Itoa(reads),
				fmt.Sprintf("%.0f", lab.Median(rates)), load1())
		}
	}
	fmt.Printf("### Short reads\n\nA short read returned less than was there: from /dev/zero, less than the 1 MiB asked; "+
		"from a pipe, less than FIONREAD said it held just before (the pipe holds 1 MiB, F_SETPIPE_SZ). For dd, its partial records in "+
		"(\"N+M records in\": M). Runs of %v; dd copies %d MiB.\n\n%s\n", e.o.shortTime, e.o.ddMiB, t.String())
	return nil
}

func (e *env) shortRun(ctx context.Context, tc *tcg, a arm, src string) (shorts, reads int, rate float64, err error) {
	p, err := tc.start(ctx, tenantConfig{file: e.b.File("short"), src: src, chunk: 1 << 20, cap: int64(e.o.fileCap)})
	if err != nil {
		return 0, 0, 0, err
	}
	defer p.close()
	end, err := e.slowed(tc, a, p.ready.Writer)
	if err != nil {
		return 0, 0, 0, err
	}
	if err := p.call("stream", nil); err != nil {
		return 0, 0, 0, err
	}
	time.Sleep(e.o.shortTime)
	if err := end(); err != nil { // thaws, so that the loop can stop
		return 0, 0, 0, err
	}
	r, err := p.stop()
	if err != nil {
		return 0, 0, 0, err
	}
	return int(r.ShortReads), int(r.Reads), lab.MiB(r.Bytes) / (float64(r.Elapsed) / 1e9), nil
}

var ddRecords = regexp.MustCompile(`(\d+)\+(\d+) records in`)

// ddRun runs dd inside the tenant's cgroups, slowed by a once it runs,
// and returns its partial records.
func (e *env) ddRun(ctx context.Context, tc *tcg, a arm) (partial, records int, rate float64, err error) {
	cmd := tc.mem.Command(ctx, "dd", "if=/dev/zero", "of="+e.b.File("dd"), "bs=1M", "count="+strconv.Itoa(e.o.ddMiB))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, 0, err
	}
	// The shell that joins the cgroups execs dd: the same PID, and one
	// thread.
	pid := cmd.Process.Pid
	time.Sleep(2 * time.Millisecond)
	if !e.v2 {
		_ = writeFile(filepath.Join(tc.cpu, "cgroup.procs"), strconv.Itoa(pid))
	}
	end, err := e.slowed(tc, a, pid)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return 0, 0, 0, err
	}
	werr := cmd.Wait()
	el := time.Since(t0)
	if err := end(); err != nil {
		return 0, 0, 0, err
	}
	if werr != nil {
		return 0, 0, 0, fmt.Errorf("dd: %w (%s)", werr, stderr.String())
	}
	m := ddRecords.FindStringSubmatch(stderr.String())
	if m == nil {
		return 0, 0, 0, fmt.Errorf("dd: no records line in %q", stderr.String())
	}
	full, _ := strconv.Atoi(m[1])
	partial, _ = strconv.Atoi(m[2])
	return partial, full + partial, float64(e.o.ddMiB) / el.Seconds(), nil
}
