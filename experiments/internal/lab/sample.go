package lab

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/observe"
	"github.com/memcgd/memcgd/memcg"
)

// Observe reads c's state as memcgd sees it (observe.Reader.Observe):
// usage, limit, failcnt, the hierarchical memory.stat figures and the
// memory PSI of its unified mirror.
func (l *Lab) Observe(c *Cgroup) (memcg.Stat, error) {
	return observe.NewReader(l.Layout).Observe(c.Path)
}

// Sampler observes cgroups at a fixed interval on its own goroutine.
type Sampler struct {
	stop    chan struct{}
	done    chan struct{}
	samples Samples
	err     error
}

// Samples are a sampler's observations.
type Samples struct {
	// At is when each round of observations began, since Sample.
	At []time.Duration
	// Stats holds each cgroup's observations, in the order the cgroups
	// were given to Sample; Stats[i][k] is from round k.
	Stats []Stats
	// Frozen says, in the same layout, whether the cgroup was frozen
	// (being throttled by memcgd) when observed.
	Frozen [][]bool
}

// FrozenShare is the share of cgroup i's observations in which it was
// frozen, in percent.
func (s Samples) FrozenShare(i int) float64 {
	if len(s.Frozen[i]) == 0 {
		return 0
	}
	n := 0
	for _, f := range s.Frozen[i] {
		if f {
			n++
		}
	}
	return float64(n) / float64(len(s.Frozen[i])) * 100
}

// Sample starts observing cgs, one after the other, every interval until
// Stop.
func (l *Lab) Sample(every time.Duration, cgs ...*Cgroup) *Sampler {
	s := &Sampler{stop: make(chan struct{}), done: make(chan struct{})}
	s.samples.Stats = make([]Stats, len(cgs))
	s.samples.Frozen = make([][]bool, len(cgs))
	r := observe.NewReader(l.Layout)
	start := time.Now()
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			at := time.Since(start)
			for i, c := range cgs {
				st, err := r.Observe(c.Path)
				if err != nil {
					s.err = err
					return
				}
				s.samples.Stats[i] = append(s.samples.Stats[i], st)
				s.samples.Frozen[i] = append(s.samples.Frozen[i], c.frozen())
			}
			s.samples.At = append(s.samples.At, at)
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Stop ends the sampling and returns the observations, or the error that
// ended it early.
func (s *Sampler) Stop() (Samples, error) {
	close(s.stop)
	<-s.done
	return s.samples, s.err
}

// frozen reports whether either freezer holds c's tasks frozen or
// freezing: the unified mirror's cgroup.events "frozen 1" or its
// cgroup.freeze set, or the v1 freezer.state other than THAWED.
func (c *Cgroup) frozen() bool {
	if c.Unified != "" {
		if b, err := os.ReadFile(filepath.Join(c.Unified, "cgroup.freeze")); err == nil && strings.TrimSpace(string(b)) == "1" {
			return true
		}
	}
	if c.Freezer != "" {
		if b, err := os.ReadFile(filepath.Join(c.Freezer, "freezer.state")); err == nil && strings.TrimSpace(string(b)) != "THAWED" {
			return true
		}
	}
	return false
}

// Stats is a sequence of observations of one cgroup.
type Stats []memcg.Stat

// Series is f of each observation.
func (st Stats) Series(f func(memcg.Stat) uint64) Series {
	out := make(Series, len(st))
	for i, s := range st {
		out[i] = f(s)
	}
	return out
}

// Gaps is the median and 99th percentile of the intervals between two
// rounds of observations: the sampling interval achieved, which a loaded
// machine or slow reads can stretch past the one asked for.
func (s Samples) Gaps() (p50, p99 time.Duration) {
	if len(s.At) < 2 {
		return 0, 0
	}
	g := make(Series, len(s.At)-1)
	for i := range g {
		g[i] = uint64(s.At[i+1] - s.At[i])
	}
	return time.Duration(g.Percentile(50)), time.Duration(g.Percentile(99))
}
