package sched

import (
	"time"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// The readings of ancestors the steps reuse: siblings stepped together
// share their parents, and an audit of thousands of cgroups would
// otherwise read the same few ancestors thousands of times. A reading up
// to ActiveInterval old is used as it is; one up to StaleAncestor old is
// used too, and read again off the steps (Refresh); an older one is read
// by the step that needs it.

// reading is an ancestor's state when it was read; refreshing says a
// Refresh of it is in flight.
type reading struct {
	stat       memcg.Stat
	at         time.Time
	refreshing bool
}

// ancestor returns p's reading if a step may use it, and asks for a
// newer one when it is getting old.
func (c *Core) ancestor(p host.Cgroup) (memcg.Stat, bool) {
	o, ok := c.ancestors[p]
	if !ok {
		return memcg.Stat{}, false
	}
	age := c.now.Sub(o.at)
	if age >= StaleAncestor {
		delete(c.ancestors, p)
		return memcg.Stat{}, false
	}
	if age >= c.cfg.ActiveInterval && !o.refreshing {
		o.refreshing = true
		c.ancestors[p] = o
		c.emit(Op{Kind: Refresh, Cgroup: p, Read: []host.Cgroup{p}}, pendingOp{})
	}
	return o.stat, true
}

// keepAncestor keeps p's reading taken at at.
func (c *Core) keepAncestor(p host.Cgroup, s memcg.Stat, at time.Time) {
	c.ancestors[p] = reading{stat: s, at: at}
}

// refreshed takes a Refresh's reading.
func (c *Core) refreshed(p pendingOp, r Result) {
	cg := p.op.Cgroup
	cur, ok := c.ancestors[cg]
	switch {
	case !ok:
		// Swept or forgotten meanwhile: the next step reads it.
	case r.Err != nil || len(r.Stats) == 0:
		cur.refreshing = false
		c.ancestors[cg] = cur
	default:
		c.ancestors[cg] = reading{stat: r.Stats[0], at: r.At}
	}
}

// sweepAncestors drops the readings too old to be used again, so that the
// cache does not keep removed parents.
func (c *Core) sweepAncestors() {
	for p, o := range c.ancestors {
		if c.now.Sub(o.at) >= StaleAncestor && !o.refreshing {
			delete(c.ancestors, p)
		}
	}
}
