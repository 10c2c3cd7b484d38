package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/memcgd/memcgd/experiments/internal/lab"
	"github.com/memcgd/memcgd/internal/stats"
)

// burst shows what a paced writer's dirtying looks like inside each
// period: the writer, paced from its start at each -bursts pair, records
// when each 1 MiB write(2) returned, and the table gives the bytes it
// dirtied per period, the bursts (writes closer together than a tenth of
// the period) and the gaps between writes.
func (e *env) burst(ctx context.Context) error {
	mech := e.threadMech()
	tc, err := e.tenantCgroup("burst", nil)
	if err != nil {
		return err
	}
	defer tc.remove()
	t := lab.Table{Header: []string{"write(2) size", "quota/period", "MiB/s", "MiB per period p50", "max", "periods with no write",
		"burst MiB p50", "burst max", "burst length p50 (ms)", "max", "gap p50 (ms)", "gap p99", "gap max", "load1"}}
	type run struct {
		chunk  int
		q, per time.Duration
	}
	var runs []run
	for _, qp := range e.o.bursts {
		runs = append(runs, run{1 << 20, qp[0], qp[1]})
	}
	// One long write(2) per 64 MiB: a thread that stays in the kernel
	// longer than its quota, which a throttle at the return to user space
	// (6.18) cannot stop before the write ends.
	runs = append(runs, run{64 << 20, 2 * time.Millisecond, 10 * time.Millisecond}, run{64 << 20, time.Millisecond, 200 * time.Millisecond})
	for _, rn := range runs {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		q, per := rn.q, rn.per
		p, err := tc.start(ctx, tenantConfig{file: e.b.File("burst"), src: srcZero, chunk: rn.chunk, cap: int64(e.o.fileCap), stamps: 1 << 20})
		if err != nil {
			return err
		}
		// Page frames freed by a truncation, not touched for the first
		// time (see warm).
		if err := p.call(fmt.Sprintf("write %d", 2*e.o.fileCap), nil); err != nil {
			return err
		}
		if err := p.call("truncate", nil); err != nil {
			return err
		}
		pc, err := tc.pacer(mech)
		if err != nil {
			return err
		}
		if err := pc.Pace([]int{p.ready.Writer}, q, per); err != nil {
			return err
		}
		if err := p.call("stream", nil); err != nil {
			return err
		}
		time.Sleep(max(e.o.burstTime, 20*per))
		r, err := p.stop()
		if err != nil {
			return err
		}
		if err := pc.Release(); err != nil {
			return err
		}
		if err := p.close(); err != nil {
			return err
		}
		s := summarizeBursts(r.Stamps, rn.chunk, per)
		t.Add(fmt.Sprintf("%d MiB", rn.chunk>>20), fmt.Sprintf("%v/%v", q, per), fmt.Sprintf("%.1f", lab.MiB(r.Bytes)/(float64(r.Elapsed)/1e9)),
			f1(s.perPeriod.p50), f1(s.perPeriod.max), fmt.Sprintf("%.0f%%", s.emptyShare*100),
			f1(s.burstMiB.p50), f1(s.burstMiB.max), f2(s.burstLen.p50), f2(s.burstLen.max),
			f2(s.gap.p50), f2(s.gap.p99), f2(s.gap.max), load1())
	}
	fmt.Printf("### Bursts, mechanism %s\n\nThe writer of the law, paced from its first write, for max(%v, 20 periods); "+
		"a burst is a run of writes each returning within a tenth of the period of the one before. The 64 MiB rows read and write 64 MiB per call.\n\n%s\n", mech, e.o.burstTime, t.String())
	return nil
}

// threadMech is the per-thread mechanism of this host's layout.
func (e *env) threadMech() string {
	if e.v2 {
		return mechThreaded
	}
	return mechV1
}

type dist struct{ p50, p99, max float64 }

func distOf(v []float64) dist {
	if len(v) == 0 {
		return dist{}
	}
	s := slices.Sorted(slices.Values(v))
	return dist{p50: stats.Percentile(s, 50), p99: stats.Percentile(s, 99), max: s[len(s)-1]}
}

type burstSummary struct {
	perPeriod, burstMiB, burstLen, gap dist // MiB, MiB, ms, ms
	emptyShare                         float64
}

// summarizeBursts cuts a writer's write-return times (ns since its start,
// ascending), each write chunk bytes, into periods and bursts.
func summarizeBursts(stamps []int64, chunk int, period time.Duration) burstSummary {
	var s burstSummary
	if len(stamps) == 0 {
		return s
	}
	mib := float64(chunk) / (1 << 20)
	n := int(stamps[len(stamps)-1]/period.Nanoseconds()) + 1
	per := make([]float64, n)
	for _, st := range stamps {
		per[st/period.Nanoseconds()] += mib
	}
	empty := 0
	for _, v := range per {
		if v == 0 {
			empty++
		}
	}
	s.perPeriod, s.emptyShare = distOf(per), float64(empty)/float64(n)
	closeGap := period.Nanoseconds() / 10
	var gaps, sizes, lens []float64
	start, size := stamps[0], mib
	for i := 1; i < len(stamps); i++ {
		g := stamps[i] - stamps[i-1]
		gaps = append(gaps, float64(g)/1e6)
		if g <= closeGap {
			size += mib
			continue
		}
		sizes, lens = append(sizes, size), append(lens, float64(stamps[i-1]-start)/1e6)
		start, size = stamps[i], mib
	}
	sizes, lens = append(sizes, size), append(lens, float64(stamps[len(stamps)-1]-start)/1e6)
	s.burstMiB, s.burstLen, s.gap = distOf(sizes), distOf(lens), distOf(gaps)
	return s
}

func f1(v float64) string { return fmt.Sprintf("%.1f", v) }
func f2(v float64) string { return fmt.Sprintf("%.2f", v) }
