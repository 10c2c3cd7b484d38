package sched

import "github.com/memcgd/memcgd/memcg"

// stepArrays keeps the arrays a step needs and gives back when it ends,
// for the next steps: a busy cgroup steps hundreds of times a second, and
// each would otherwise leave them to the collector.
type stepArrays struct {
	// chains and cached are the pendingOp.cached and fromCache of
	// finished steps, at most one per step in flight.
	chains [][]memcg.Stat
	cached [][]bool
	// knobs is the scratch of the step being decided (observed).
	knobs []memcg.Knobs
}

// take returns a chain of n zero readings and n false flags.
func (a *stepArrays) take(n int) ([]memcg.Stat, []bool) {
	k := len(a.chains)
	if k == 0 || cap(a.chains[k-1]) < n || cap(a.cached[k-1]) < n {
		return make([]memcg.Stat, n), make([]bool, n)
	}
	chain, cached := a.chains[k-1][:n], a.cached[k-1][:n]
	a.chains, a.cached = a.chains[:k-1], a.cached[:k-1]
	clear(chain)
	clear(cached)
	return chain, cached
}

// put gives chain and cached back once their step has been decided.
func (a *stepArrays) put(chain []memcg.Stat, cached []bool) {
	if chain == nil || cached == nil {
		return
	}
	a.chains = append(a.chains, chain)
	a.cached = append(a.cached, cached)
}
