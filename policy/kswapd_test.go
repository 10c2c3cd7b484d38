package policy

import (
	"testing"
	"time"

	"github.com/memcgd/memcgd/memcg"
)

// kswapdCgroup is a cgroup of clean page cache driven by a controller
// as the agent drives it: each decision's reclaim is carried out at once
// (the kernel reclaiming up to extra bytes more than asked, as its
// batches do), the tasks charge at rate growth until stopAt, and the
// next step comes at the decision's NextLook.
type kswapdCgroup struct {
	limit  uint64
	w      memcg.Watermarks
	growth float64 // bytes/s the tasks charge, while before stopAt
	stopAt time.Duration
	extra  uint64 // what the kernel reclaims past each request, at most
}

// pageUp is n in whole pages, rounded up.
func pageUp(n uint64) uint64 { return (n + memcg.PageSize - 1) / memcg.PageSize * memcg.PageSize }

// kswapdStep is one observation and its decision.
type kswapdStep struct {
	at   time.Duration
	free uint64
	d    Decision
}

func (k kswapdCgroup) run(t *testing.T, free uint64, until time.Duration) []kswapdStep {
	t.Helper()
	c := NewController()
	t0 := time.Unix(1000, 0)
	usage := k.limit - free
	var charged uint64 // the tasks' dirtied-bytes counter: each a new page
	var steps []kswapdStep
	for at := time.Duration(0); at < until; {
		now := t0.Add(at)
		d := c.Step(Input{Now: now, Stat: memcg.Stat{Limit: k.limit, Usage: usage, File: usage,
			Counters: memcg.Counters{HasDirtied: true, DirtiedBytes: charged}},
			Dirty: memcg.DirtyLimits{Background: memcg.NoLimit, Limit: memcg.NoLimit}, Watermarks: k.w,
			Reaction: ms, ActiveInterval: 50 * ms})
		steps = append(steps, kswapdStep{at: at, free: k.limit - usage, d: d})
		if d.Reclaim > 0 {
			got := min(d.Reclaim+k.extra, usage)
			usage -= got
			c.ReclaimDone(now.Add(100*time.Microsecond), memcg.Stat{Limit: k.limit, Usage: usage, File: usage}, false, 50*ms)
		}
		// The next step: the decision's look, or the usage watch's
		// report, whichever comes first; a second at most.
		next := d.NextLook
		if next == 0 {
			next = time.Second
		}
		if at < k.stopAt && k.growth > 0 && d.Wake.UsageAbove != memcg.NoLimit {
			toWake := time.Duration(float64(sat(d.Wake.UsageAbove, usage)+1) / k.growth * float64(time.Second))
			next = max(min(next, toWake), MinLook)
		}
		if at < k.stopAt {
			charge := uint64(k.growth * min(next, k.stopAt-at).Seconds())
			charged += charge
			usage = min(usage+charge, k.limit) // at the limit the kernel reclaims on its own
		}
		at += next
	}
	return steps
}

func TestKswapdRunEndsAtHighWmark(t *testing.T) {
	_, w500 := seed001()
	w30 := memcg.Knobs{MinFreeKbytes: 8192}.Watermarks(30 * mib)
	tests := []struct {
		name string
		k    kswapdCgroup
		free uint64 // at the first look
		// wantLookAboveMin: every look after the first wake-up, while the
		// tasks charge, finds free at min_wmark or above.
		wantLookAboveMin bool
	}{
		{
			name: "seed 001: a pass ends at high_wmark, never past it by more than a step's granularity",
			k:    kswapdCgroup{limit: 500 * mib, w: w500, extra: ReclaimGranule},
		},
		{
			name: "seed 001: a pass the kernel meets exactly ends at high_wmark exactly",
			k:    kswapdCgroup{limit: 500 * mib, w: w500},
		},
		{
			name: "seed 001: min_free_kbytes 8192 under a 30 MiB limit: the pass ends at high_wmark, 12 MiB free",
			k:    kswapdCgroup{limit: 30 * mib, w: w30, extra: ReclaimGranule},
		},
		{
			name:             "seed 001: growth moves the wake-up and the looks earlier, not the end of the run",
			k:                kswapdCgroup{limit: 500 * mib, w: w500, growth: 100 * mib, stopAt: 1500 * ms, extra: ReclaimGranule},
			free:             60 * mib,
			wantLookAboveMin: true,
		},
		{
			name:             "seed 001: a cgroup filled at 50 MiB/s past min_free_kbytes 8192 ends its last run at high_wmark",
			k:                kswapdCgroup{limit: 30 * mib, w: w30, growth: 50 * mib, stopAt: time.Second},
			free:             30 * mib,
			wantLookAboveMin: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.k.w
			steps := tt.k.run(t, tt.free, 3*time.Second)
			woken := false
			runs := 0
			for i, st := range steps {
				// No step asks for more than what is left to high.
				if want := pageUp(sat(w.High, st.free)); st.d.Reclaim > want {
					t.Errorf("step %d at %v (free %d): Reclaim %d, more than the %d left to high_wmark", i, st.at, st.free, st.d.Reclaim, want)
				}
				if st.d.ReclaimStart {
					woken = true
					runs++
				}
				if woken && tt.wantLookAboveMin && st.at < tt.k.stopAt && st.free < w.Min {
					t.Errorf("step %d at %v: free %d below min_wmark %d: the look came too late for the growth", i, st.at, st.free, w.Min)
				}
				// The step after a run's last one ends it, at high.
				if i > 0 && steps[i-1].d.Reclaim > 0 && st.d.Why&ReasonWatermark == 0 {
					if st.free < w.High || st.free >= w.High+tt.k.extra+memcg.PageSize {
						t.Errorf("step %d at %v: the run ended with free %d, want high_wmark %d to %d and a page", i, st.at, st.free, w.High, w.High+tt.k.extra)
					}
					if want := st.free - w.High; st.d.ReclaimOvershoot != want {
						t.Errorf("step %d at %v: ReclaimOvershoot %d, want free - high_wmark = %d", i, st.at, st.d.ReclaimOvershoot, want)
					}
				}
			}
			if runs == 0 {
				t.Fatalf("no run started")
			}
			last := steps[len(steps)-1]
			if last.free < w.High || last.free >= w.High+tt.k.extra+memcg.PageSize {
				t.Errorf("at the end (%v), free %d, want high_wmark %d to %d and a page", last.at, last.free, w.High, w.High+tt.k.extra)
			}
			if last.d.Reclaim != 0 {
				t.Errorf("at the end, still reclaiming %d", last.d.Reclaim)
			}
		})
	}
}

func TestKswapdLooksBeforeGrowthReachesMin(t *testing.T) {
	limit, w := seed001()
	const growth = 100 * mib // bytes/s, for a second before the look
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name     string
		free     uint64 // at the look
		wantLook time.Duration
		wantRun  bool
	}{
		{"free far above high: left to the usage watch", 60 * mib, 0, false},
		{"free above high: looked at again before growth takes it to min_wmark", w.High + 1*mib,
			time.Duration(float64(w.High+1*mib-w.Min)/growth*float64(time.Second)) - ms, false},
		{"free below the wake-up: the run reclaims to high, and the look comes before growth takes high to min_wmark", w.Low,
			time.Duration(float64(w.Low+pageUp(w.High-w.Low)-w.Min)/growth*float64(time.Second)) - ms, true},
		{"free below min_wmark: the same, counted from where the run leaves it", w.Min / 2,
			time.Duration(float64(w.Min/2+pageUp(w.High-w.Min/2)-w.Min)/growth*float64(time.Second)) - ms, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewController()
			in := func(at time.Duration, usage uint64) Input {
				return Input{Now: t0.Add(at), Stat: memcg.Stat{Limit: limit, Usage: usage, File: usage},
					Dirty: memcg.DirtyLimits{Background: memcg.NoLimit, Limit: memcg.NoLimit}, Watermarks: w,
					Reaction: ms, ActiveInterval: 50 * ms}
			}
			// A second of growth at 1 MiB per 10 ms, ending at the look.
			end := limit - tt.free
			var d Decision
			for i := 0; i <= 100; i++ {
				d = c.Step(in(time.Duration(i)*10*ms, end-uint64(100-i)*mib))
			}
			if diff := d.NextLook - tt.wantLook; diff < -10*time.Microsecond || diff > 10*time.Microsecond {
				t.Errorf("NextLook %v, want %v", d.NextLook, tt.wantLook)
			}
			if tt.wantLook == 0 {
				ahead := uint64(float64(growth) * (51 * ms).Seconds())
				if want := limit - min(w.Low+ahead, w.High); d.Wake.UsageAbove < want-4096 || d.Wake.UsageAbove > want+4096 {
					t.Errorf("Wake.UsageAbove %d, want the usage at which free is low plus the growth over the horizon, at most high: %d", d.Wake.UsageAbove, want)
				}
			}
			if got := d.Reclaim > 0; got != tt.wantRun {
				t.Errorf("Reclaim %d, want a run: %v", d.Reclaim, tt.wantRun)
			}
			if tt.wantRun && d.Reclaim != pageUp(w.High-tt.free) {
				t.Errorf("Reclaim %d, want what is left to high_wmark in pages, %d", d.Reclaim, pageUp(w.High-tt.free))
			}
		})
	}
}

func TestKswapdDecidesNothingOnAReadingOlderThanItsLastStep(t *testing.T) {
	limit, w := seed001()
	t0 := time.Unix(1000, 0)
	step := func(c *Controller, at time.Duration, free uint64) Decision {
		return c.Step(Input{Now: t0.Add(at), Stat: memcg.Stat{Limit: limit, Usage: limit - free, File: limit - free},
			Dirty: memcg.DirtyLimits{Background: memcg.NoLimit, Limit: memcg.NoLimit}, Watermarks: w})
	}
	c := NewController()
	d := step(c, 0, 1*mib)
	if d.Reclaim != pageUp(w.High-1*mib) || !d.ReclaimStart {
		t.Fatalf("first step: Reclaim %d ReclaimStart %v, want %d and a run", d.Reclaim, d.ReclaimStart, pageUp(w.High-1*mib))
	}
	// The reclaim completes at 3 ms; a reading taken at 2 ms, while it
	// ran, still shows free at 1 MiB: asking again would reclaim twice.
	c.ReclaimDone(t0.Add(3*ms), memcg.Stat{}, false, 0)
	d = step(c, 2*ms, 1*mib)
	if d.Reclaim != 0 || d.NextLook != MinLook || d.ReclaimStart {
		t.Errorf("reading older than the reclaim: Reclaim %d NextLook %v ReclaimStart %v, want none, a look at once, the run going on",
			d.Reclaim, d.NextLook, d.ReclaimStart)
	}
	// The next reading shows the run ended at high_wmark, 4 KiB past.
	d = step(c, 4*ms, w.High+4096)
	if d.Reclaim != 0 || d.Why&ReasonWatermark != 0 || d.ReclaimOvershoot != 4096 {
		t.Errorf("after the reclaim: Reclaim %d Why %v ReclaimOvershoot %d, want the run ended, 4096 past high", d.Reclaim, d.Why, d.ReclaimOvershoot)
	}
}

// Growth that would charge high_wmark down to min_wmark sooner than a look
// can come is not chased with looks at the floor: they would come late
// all the same, on the CPU the writer runs on. The run goes on at the
// active interval, and the kernel reclaims at the limit meanwhile.
func TestKswapdDoesNotChaseGrowthFasterThanItsLooks(t *testing.T) {
	limit, w := seed001()
	c := NewController()
	t0 := time.Unix(1000, 0)
	const perStep = 40 * mib // every 10 ms: 4 GiB/s
	end := limit - w.Low
	var d Decision
	for i := 0; i <= 100; i++ {
		usage := end - uint64(100-i)*perStep/100 // a second of it, ending at low
		d = c.Step(Input{Now: t0.Add(time.Duration(i) * 10 * ms), Stat: memcg.Stat{Limit: limit, Usage: usage, File: usage,
			Counters: memcg.Counters{HasDirtied: true, DirtiedBytes: uint64(i) * perStep}},
			Dirty: memcg.DirtyLimits{Background: memcg.NoLimit, Limit: memcg.NoLimit}, Watermarks: w,
			Reaction: ms, ActiveInterval: 50 * ms})
	}
	if d.Reclaim == 0 || d.NextLook != 50*ms {
		t.Errorf("Reclaim %d NextLook %v, want the run, looked at again at the active interval", d.Reclaim, d.NextLook)
	}
}
