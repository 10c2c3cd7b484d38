package main

import (
	"context"
	"fmt"
	"time"

	"github.com/memcgd/memcgd/experiments/internal/lab"
)

// law measures the pacing law: a CPU-bound dirtier (1 MiB reads from
// /dev/zero written into the page cache, its file truncated at -file-cap
// so that it never waits on writeback) is paced at each quota/period of
// -shares × -periods, and its dirty rate (the writer thread's wchar) and
// CPU share (its schedstat) are measured over -window.
func (e *env) law(ctx context.Context) error {
	for _, mech := range e.mechs {
		if err := e.lawOf(ctx, mech); err != nil {
			return err
		}
	}
	return nil
}

// window is what one measuring window saw.
type window struct {
	rate, cpu          float64 // bytes/s; share of a CPU
	periods, throttled uint64  // cpu.stat deltas of the pace group
	throttledTime      time.Duration
}

func (e *env) measureWindow(p *proc, statDir string, d time.Duration) (window, error) {
	pid, tid := p.ready.PID, p.ready.Writer
	io0, err := readThreadIO(pid, tid)
	if err != nil {
		return window{}, err
	}
	c0, err := threadCPU(pid, tid)
	if err != nil {
		return window{}, err
	}
	var p0, th0 uint64
	var tt0 time.Duration
	if statDir != "" {
		if p0, th0, tt0, err = cpuStat(statDir); err != nil {
			return window{}, err
		}
	}
	t0 := time.Now()
	time.Sleep(d)
	io1, err := readThreadIO(pid, tid)
	if err != nil {
		return window{}, err
	}
	c1, err := threadCPU(pid, tid)
	if err != nil {
		return window{}, err
	}
	el := time.Since(t0)
	w := window{rate: float64(io1.WChar-io0.WChar) / el.Seconds(), cpu: float64(c1-c0) / float64(el)}
	if statDir != "" {
		p1, th1, tt1, err := cpuStat(statDir)
		if err != nil {
			return window{}, err
		}
		w.periods, w.throttled, w.throttledTime = p1-p0, th1-th0, tt1-tt0
	}
	return w, nil
}

func (e *env) lawOf(ctx context.Context, mech string) error {
	tc, err := e.tenantCgroup("law-"+mech, nil)
	if err != nil {
		return err
	}
	defer tc.remove()
	p, err := tc.start(ctx, tenantConfig{file: e.b.File("law-" + mech), src: srcZero, chunk: 1 << 20, cap: int64(e.o.fileCap)})
	if err != nil {
		return err
	}
	defer p.close()
	if err := p.call("stream", nil); err != nil {
		return err
	}
	if err := warm(p, e.o.fileCap); err != nil {
		return err
	}
	base, err := e.measureWindow(p, "", e.o.window)
	if err != nil {
		return err
	}
	pc, err := tc.pacer(mech)
	if err != nil {
		return err
	}
	defer pc.Release()

	t := lab.Table{Header: []string{"quota (ms)", "period (ms)", "quota/period", "dirty rate (MiB/s)", "writer CPU share",
		"CPU share ÷ (quota/period)", "MiB per CPU-second", "rate ÷ (quota/period × unpaced MiB per CPU-second)", "throttled periods", "load1"}}
	perCPU := base.rate / base.cpu
	t.Add("unpaced", "", "", fmt.Sprintf("%.0f", lab.MiB(uint64(base.rate))), fmt.Sprintf("%.3f", base.cpu), "",
		fmt.Sprintf("%.0f", lab.MiB(uint64(perCPU))), "", "", load1())
	type qp struct{ q, p time.Duration }
	var cfgs []qp
	for _, per := range e.o.periods {
		for _, s := range e.o.shares {
			q := time.Duration(s * float64(per)).Round(10 * time.Microsecond)
			cfgs = append(cfgs, qp{q, per})
		}
	}
	cfgs = append(cfgs, qp{time.Millisecond, 200 * time.Millisecond})
	var below []string
	for _, c := range cfgs {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if c.q < time.Millisecond {
			below = append(below, fmt.Sprintf("%v/%v", c.q, c.p))
			continue
		}
		if err := pc.Pace([]int{p.ready.Writer}, c.q, c.p); err != nil {
			return fmt.Errorf("pace %v/%v: %w", c.q, c.p, err)
		}
		time.Sleep(max(3*c.p, 200*time.Millisecond))
		w, err := e.measureWindow(p, tc.paceDir(mech), max(e.o.window, 10*c.p))
		if err != nil {
			return err
		}
		share := float64(c.q) / float64(c.p)
		t.Add(ms(c.q), ms(c.p), fmt.Sprintf("%.3f", share), fmt.Sprintf("%.1f", lab.MiB(uint64(w.rate))),
			fmt.Sprintf("%.3f", w.cpu), fmt.Sprintf("%.2f", w.cpu/share), fmt.Sprintf("%.0f", lab.MiB(uint64(w.rate/w.cpu))),
			fmt.Sprintf("%.2f", w.rate/(share*perCPU)), fmt.Sprintf("%d of %d", w.throttled, w.periods), load1())
	}
	if err := pc.Release(); err != nil {
		return err
	}
	if _, err := p.stop(); err != nil {
		return err
	}
	fmt.Printf("### Pacing law, mechanism %s\n\nA CPU-bound dirtier: 1 MiB read(2)s from /dev/zero, each write(2)n into the page cache of a file on disk "+
		"truncated every %s (so it never waits on writeback), measured after it wrote the file over twice. The law is rate = quota/period × MiB per CPU-second. Each quota is measured over max(%v, 10 periods) after 3 periods to settle.\n\n%s\n",
		mech, e.o.fileCap.String(), e.o.window, t.String())
	if len(below) > 0 {
		fmt.Printf("Not run, quota below the kernel's 1 ms minimum (tg_set_cfs_bandwidth refuses it): %v.\n\n", below)
	}
	return nil
}

// warm lets the writer run until it has written its file over twice, so
// that it writes into page frames its truncations freed rather than into
// memory touched for the first time, which on a virtual machine is
// several times slower (the hypervisor backs a guest page at its first
// touch), and which the writer's rate would otherwise depend on.
func warm(p *proc, fileCap lab.Size) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		io, err := readThreadIO(p.ready.PID, p.ready.Writer)
		if err != nil {
			return err
		}
		if io.WChar >= 2*uint64(fileCap)+(64<<20) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%g", float64(d)/float64(time.Millisecond)) }
