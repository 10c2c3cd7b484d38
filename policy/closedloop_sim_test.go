package policy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/memcgd/memcgd/memcg"
)

// simWorld is a tiny model of one cgroup on a host, written apart from
// the policy so that the policy can be checked against it: a writer that
// dirties at a fixed rate unless frozen, a device that writes the dirty
// pages at a fixed rate, and a driver that carries out the decisions with
// a reaction delay: a step happens that long after what triggers it (a
// watch crossing, NextLook passing, HoldFor running out), and acts at
// once on what it sees then.
type simWorld struct {
	writerRate, deviceRate float64 // bytes/s
	// writerSwing, when not zero, makes the writer's speed a new uniform
	// draw from writerRate ± writerSwing every writerPeriod (a fixed
	// seed): a writer the rate estimate cannot predict.
	writerSwing  float64
	writerPeriod time.Duration
	limits       memcg.DirtyLimits
	tracker      bool
	reaction     time.Duration
	trace        bool // t.Logf every step
	// legacy drives the cgroup as the agent did before issue 7: the
	// open-loop Pause (FreezerTimed), a look every active interval while
	// active, the usage watch otherwise, and no use of NextLook.
	legacy bool
}

// simResult is what a run measured.
type simResult struct {
	p99, maxDirty, meanDirty float64 // dirty+writeback after the warm-up, bytes
	maxWarmup                float64 // the most dirty+writeback during it
	throughput               float64 // writer's bytes/s after the warm-up
	steps, freezes           int
	refreezes                int           // by the driver, at RunFor
	maxFrozen                time.Duration // longest time frozen at a stretch
	episodes                 int
	bandwidth                uint64 // the controller's estimate at the end
}

const (
	simTick     = 20 * time.Microsecond
	simDuration = 5 * time.Second
	simWarmup   = 500 * time.Millisecond // not sampled: the first writes
	simUsage    = 64 << 20               // clean page cache beside the dirty pages
)

func (w simWorld) run(t *testing.T) simResult {
	t.Helper()
	c := NewController()
	start := time.Unix(1000, 0)
	var (
		dirty, dirtied, written float64
		frozen                  bool
		frozenSince, thawBy     time.Time
		runUntil                time.Time     // thawed: the last decision's RunFor deadline
		runAfter                time.Duration // frozen: the RunFor that follows HoldFor
		stepAt                  = start       // the first look: the daemon's start-up scan
		timerAt                 time.Time
		usageAbove              = uint64(memcg.NoLimit)
		dirtiedAbove            = math.Inf(1)
		armed                   bool
		episode                 bool
		r                       simResult
		samples                 []float64
		dirtiedAtWarmup         = -1.0
	)
	trigger := func(at time.Time) {
		if stepAt.IsZero() || at.Before(stepAt) {
			stepAt = at
		}
	}
	dt := simTick.Seconds()
	rng := rand.New(rand.NewPCG(7, 11))
	speed, speedUntil := w.writerRate, start
	for now := start; now.Before(start.Add(simDuration)); now = now.Add(simTick) {
		if w.writerSwing > 0 && !now.Before(speedUntil) {
			speed = w.writerRate + w.writerSwing*(2*rng.Float64()-1)
			speedUntil = now.Add(w.writerPeriod)
		}
		if !frozen {
			dirty += speed * dt
			dirtied += speed * dt
		}
		out := min(dirty, w.deviceRate*dt)
		dirty -= out
		written += out

		usage := uint64(simUsage + dirty)
		if armed && (usage > usageAbove || w.tracker && dirtied > dirtiedAbove) {
			armed = false // a watch reports once; the step re-arms it
			trigger(now.Add(w.reaction))
		}
		if !timerAt.IsZero() && !now.Before(timerAt) {
			timerAt = time.Time{}
			trigger(now.Add(w.reaction))
		}
		if frozen && now.After(thawBy) {
			// HoldFor ran out with no new decision: the driver thaws
			// the cgroup on its own, lets it run for the decision's
			// RunFor if any, and steps it.
			frozen = false
			r.maxFrozen = max(r.maxFrozen, now.Sub(frozenSince))
			if runAfter > 0 {
				runUntil = now.Add(runAfter)
			}
			runAfter = 0
			trigger(now.Add(w.reaction))
		}
		if !frozen && !runUntil.IsZero() && !now.Before(runUntil) {
			// RunFor ran out with no new decision: the driver freezes
			// the cgroup on its own, for MaxPause at most, and steps it.
			runUntil = time.Time{}
			frozen, frozenSince, thawBy = true, now, now.Add(MaxPause)
			r.refreezes++
			trigger(now.Add(w.reaction))
		}
		if !stepAt.IsZero() && !now.Before(stepAt) {
			stepAt = time.Time{}
			r.steps++
			stat := memcg.Stat{Limit: 1 << 30, Usage: usage, File: usage, Dirty: uint64(dirty),
				Counters: memcg.Counters{HasDirtied: true, DirtiedBytes: uint64(dirtied)}}
			if w.legacy {
				d := c.Step(Input{Now: now, Stat: stat, Dirty: w.limits, Lead: DefaultActiveInterval})
				timerAt, usageAbove, armed = time.Time{}, d.Wake.UsageAbove, true
				switch {
				case d.Pause > 0:
					r.freezes++
					frozen, frozenSince, thawBy = true, now, now.Add(d.Pause)
				case !d.Idle() || dirty > 0 && dirty >= float64(w.limits.Background):
					timerAt = now.Add(DefaultActiveInterval).Add(w.reaction)
				case stat.Dirty > w.limits.Background/2:
					timerAt = now.Add(RecheckInterval).Add(w.reaction)
				}
			} else {
				d := c.Step(Input{
					Now:            now,
					Stat:           stat,
					Dirty:          w.limits,
					Tracker:        w.tracker,
					Reaction:       w.reaction,
					ActiveInterval: DefaultActiveInterval,
					Freezer:        FreezerHeld,
					Frozen:         frozen,
				})
				if w.trace && now.Sub(start) < simDuration {
					t.Logf("%8.2fms dirty %7.2f MiB frozen %v: %v hold %v run %v look %v ep %v bw %d rate %d", float64(now.Sub(start))/1e6, dirty/mib, frozen, d.Throttle, d.HoldFor, d.RunFor, d.NextLook, d.Episode, c.WriteBandwidth(), c.DirtyRate())
				}
				switch d.Throttle {
				case ThrottleFreeze:
					r.freezes++
					frozen, frozenSince = true, now
				case ThrottleHold:
					if !frozen {
						t.Fatalf("%v: Hold of a cgroup that is not frozen", now.Sub(start))
					}
				case ThrottleThaw:
					if frozen {
						r.maxFrozen = max(r.maxFrozen, now.Sub(frozenSince))
					}
					frozen = false
				}
				// Every decision replaces the driver's deadlines.
				thawBy, runUntil, runAfter = time.Time{}, time.Time{}, 0
				switch {
				case frozen:
					thawBy, runAfter = now.Add(d.HoldFor), d.RunFor
				case d.RunFor > 0:
					runUntil = now.Add(d.RunFor)
				}
				if frozen && !d.Episode {
					t.Fatalf("%v: frozen outside an episode", now.Sub(start))
				}
				if d.Episode && !episode {
					r.episodes++
				}
				episode = d.Episode
				usageAbove, dirtiedAbove, armed = d.Wake.UsageAbove, dirtied+float64(d.Wake.DirtiedAbove), true
				if d.NextLook > 0 {
					timerAt = now.Add(d.NextLook).Add(w.reaction)
				} else {
					timerAt = time.Time{}
				}
			}
		}
		if now.Sub(start) < simWarmup {
			r.maxWarmup = max(r.maxWarmup, dirty)
		} else {
			if dirtiedAtWarmup < 0 {
				dirtiedAtWarmup = dirtied
			}
			samples = append(samples, dirty)
		}
	}
	slices.Sort(samples)
	r.p99 = samples[len(samples)*99/100]
	r.maxDirty = samples[len(samples)-1]
	var sum float64
	for _, s := range samples {
		sum += s
	}
	r.meanDirty = sum / float64(len(samples))
	r.throughput = (dirtied - dirtiedAtWarmup) / (simDuration - simWarmup).Seconds()
	r.bandwidth = c.WriteBandwidth()
	return r
}

// Issue 7, items 3 and 4, closed loop: a writer at 1.5 GB/s into a cgroup
// with a 16 MiB dirty limit on a 200 MB/s device, driven by tracker
// wake-ups or by the fallback interval, with a driver that reacts in 1 ms
// or in 50 ms (the old active interval). The bounds are the issue's
// targets, E2: p99 of dirty+writeback at most 1.25 × dirty_bytes; E1:
// throughput at least 95 % of what the device takes. The model above
// knows nothing of the policy but its decisions. Within 50 ms the writer
// dirties 75 MB unseen, 4.5 × the limit: only the driver's RunFor timer
// keeps the runs short; without it dirty grows without bound (a run of at
// least the reaction delay per freeze of at most MaxPause: 75 MB in, 40
// MB out).
func TestClosedLoopHoldsTheLimitAtTheDevicesSpeed(t *testing.T) {
	const (
		writer = 1.5e9
		device = 200e6
	)
	limits := memcg.DirtyLimits{Background: 8 << 20, Limit: 16 << 20}
	type world struct {
		name        string
		swing       float64
		swingPeriod time.Duration
	}
	var tests []simWorld
	var names []string
	for _, wr := range []world{{"a steady writer", 0, 0}, {"a writer swinging 0.5-2.5 GB/s every 10 ms", 1e9, 10 * time.Millisecond}} {
		for _, tracker := range []bool{true, false} {
			for _, reaction := range []time.Duration{time.Millisecond, 50 * time.Millisecond} {
				how := "fallback interval"
				if tracker {
					how = "tracker wake-ups"
				}
				names = append(names, fmt.Sprintf("%s, %s, %v reaction", wr.name, how, reaction))
				tests = append(tests, simWorld{writerRate: writer, deviceRate: device, writerSwing: wr.swing, writerPeriod: wr.swingPeriod,
					limits: limits, tracker: tracker, reaction: reaction})
			}
		}
	}
	for i, w := range tests {
		t.Run(names[i], func(t *testing.T) {
			w.trace = testing.Verbose() && os.Getenv("SIMTRACE") == names[i]
			r := w.run(t)
			t.Logf("p99 dirty+writeback %.2f MiB = %.3f × limit (max %.2f, mean %.2f, max in the first %v %.1f; freerun %.0f, setpoint %.0f MiB); throughput %.1f MB/s = %.1f %% of the device; %d steps (%.0f/s), %d freezes and %d refreezes at RunFor in %d episode(s), longest freeze %v; bandwidth estimate %.1f MB/s",
				r.p99/mib, r.p99/float64(limits.Limit), r.maxDirty/mib, r.meanDirty/mib, simWarmup, r.maxWarmup/mib,
				float64(limits.Freerun())/mib, float64(limits.Freerun()+limits.Limit)/2/mib,
				r.throughput/1e6, 100*r.throughput/device, r.steps, float64(r.steps)/simDuration.Seconds(),
				r.freezes, r.refreezes, r.episodes, r.maxFrozen, float64(r.bandwidth)/1e6)
			if r.maxFrozen > MaxPause+w.reaction {
				t.Errorf("frozen %v at a stretch, past MaxPause %v and the reaction delay", r.maxFrozen, MaxPause)
			}
			if r.episodes != 1 {
				t.Errorf("%d throttle episodes for one writer, want 1", r.episodes)
			}
			if bw := float64(r.bandwidth); bw < 0.9*device || bw > 1.1*device {
				t.Errorf("bandwidth estimate %.1f MB/s, device %.1f", bw/1e6, device/1e6)
			}
			if r.p99 > 1.25*float64(limits.Limit) {
				t.Errorf("p99 of dirty+writeback %.2f MiB, above 1.25 × the %d MiB limit", r.p99/mib, limits.Limit/mib)
			}
			if r.throughput < 0.95*device {
				t.Errorf("writer at %.1f MB/s, below 95 %% of the device's %.1f", r.throughput/1e6, device/1e6)
			}
		})
	}
}

// The same model driven as the agent drove it before issue 7 (the open
// loop, looks every 50 ms) misses the targets by far, as measured on the
// host (docs/results.md, issue 7: p99 6× the limit): the simulation can
// tell a throttle that works from one that does not.
func TestTheOpenLoopOfBeforeMissesTheTargets(t *testing.T) {
	const device = 200e6
	limits := memcg.DirtyLimits{Background: 8 << 20, Limit: 16 << 20}
	r := simWorld{writerRate: 1.5e9, deviceRate: device, limits: limits, reaction: time.Millisecond, legacy: true}.run(t)
	t.Logf("open loop, 50 ms looks: p99 dirty+writeback %.2f MiB = %.3f × limit (max %.2f, mean %.2f); throughput %.1f MB/s = %.1f %% of the device; %d steps, %d pauses, longest %v",
		r.p99/mib, r.p99/float64(limits.Limit), r.maxDirty/mib, r.meanDirty/mib, r.throughput/1e6, 100*r.throughput/device, r.steps, r.freezes, r.maxFrozen)
	if r.p99 <= 1.25*float64(limits.Limit) && r.throughput >= 0.95*device {
		t.Errorf("the open loop met both targets in the model: the model cannot tell the closed loop's worth")
	}
}
