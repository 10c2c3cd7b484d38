package sched

import "github.com/memcgd/memcgd/memcg"

// stepArrays keeps the arrays a step needs and gives back when it ends,
// for the next steps: a busy cgroup steps hundreds of times a second, and
// each would otherwise leave them to the collector.
type stepArrays struct {
	// spare are the pendingOp.cached and fromCache of finished steps, at
	// most one pair per step in flight.
	spare []stepArray
	// knobs is the scratch of the step being decided (observed).
	knobs []memcg.Knobs
}

// stepArray is a step's chain of readings and its flags of the readings
// taken from the cache.
type stepArray struct {
	chain  []memcg.Stat
	cached []bool
}

// take returns a chain of n zero readings and n false flags.
func (a *stepArrays) take(n int) ([]memcg.Stat, []bool) {
	k := len(a.spare)
	if k == 0 || cap(a.spare[k-1].chain) < n {
		return make([]memcg.Stat, n), make([]bool, n)
	}
	s := a.spare[k-1]
	a.spare = a.spare[:k-1]
	chain, cached := s.chain[:n], s.cached[:n]
	clear(chain)
	clear(cached)
	return chain, cached
}

// put gives chain and cached, of equal length, back once their step has
// been decided.
func (a *stepArrays) put(chain []memcg.Stat, cached []bool) {
	if chain == nil || cached == nil {
		return
	}
	a.spare = append(a.spare, stepArray{chain, cached})
}
