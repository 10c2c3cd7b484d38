package daemon

import (
	"context"
	"errors"
	"time"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/policy"
	"github.com/memcgd/memcgd/sim/kernel"
)

// Driver is memcgd's loop on the simulated clock. The real agent
// (package agent) runs goroutines and tickers on the wall clock and cannot
// be stepped by simulated time yet, so the driver does what its step does
// for each managed cgroup: observe the cgroup and its ancestors, resolve
// the effective knobs (memcg.Resolve), step policy.Controller with Lead =
// Interval, and carry the decision out through the Host, Latency after
// the observation. Every managed cgroup is stepped each Interval, as the
// agent steps an active one; the agent's usage-threshold wake-ups, which
// can react sooner, are not modelled.
type Driver struct {
	H        *Host
	Interval time.Duration
	Latency  time.Duration
	// Managed are the cgroups memcgd manages, with their knobs.
	Managed []Managed

	ctl     map[host.Cgroup]*policy.Controller
	pending []pendingDecision
	// Steps counts controller steps; Errors the actions that failed.
	Steps, Errors int64
}

// Managed is one cgroup under memcgd and its knobs, ancestors' knobs
// included for the effective limits (root first).
type Managed struct {
	Chain []host.Cgroup
	Knobs []memcg.Knobs
}

type pendingDecision struct {
	cg host.Cgroup
	d  policy.Decision
}

// Start registers the driver's ticks on k.
func (d *Driver) Start(k *kernel.Kernel) {
	d.ctl = map[host.Cgroup]*policy.Controller{}
	iv := kernel.Time(d.Interval)
	k.Every(iv, iv, func(*kernel.Kernel) { d.observe() })
	k.Every(iv+kernel.Time(d.Latency), iv, func(*kernel.Kernel) { d.act() })
}

func (d *Driver) observe() {
	ctx := context.Background()
	d.pending = d.pending[:0]
	for _, m := range d.Managed {
		chain := make([]memcg.Stat, 0, len(m.Chain))
		ok := true
		for _, cg := range m.Chain {
			s, err := d.H.Observe(ctx, cg)
			if err != nil {
				ok = false
				break
			}
			chain = append(chain, s)
		}
		if !ok {
			d.Errors++
			continue
		}
		self := m.Chain[len(m.Chain)-1]
		eff := memcg.Resolve(chain, m.Knobs)
		c := d.ctl[self]
		if c == nil {
			c = policy.NewController()
			d.ctl[self] = c
		}
		dec := c.Step(policy.Input{Now: d.H.Now(), Stat: chain[len(chain)-1], Dirty: eff.Dirty,
			Watermarks: eff.Watermarks, WritebackFirst: eff.Knobs.WritebackFirst, Lead: d.Interval})
		d.Steps++
		if !dec.Idle() {
			d.pending = append(d.pending, pendingDecision{self, dec})
		}
	}
}

// act carries out the decisions in the order policy.Decision documents.
func (d *Driver) act() {
	ctx := context.Background()
	for _, p := range d.pending {
		var err error
		switch {
		case p.d.Flush:
			err = d.H.Flush(ctx, p.cg)
		case p.d.WriteOut:
			_, err = d.H.WriteOut(ctx, p.cg)
		}
		if err == nil && p.d.Reclaim > 0 {
			_, err = d.H.Reclaim(ctx, p.cg, p.d.Reclaim)
			if errors.Is(err, host.ErrNothingReclaimed) {
				err = nil
			}
		}
		if err == nil && p.d.Pause > 0 {
			err = d.H.Pause(ctx, p.cg, p.d.Pause)
		}
		if err != nil {
			d.Errors++
		}
	}
	d.pending = d.pending[:0]
}
