package lab

import (
	"math"
	"slices"
	"time"

	"github.com/memcgd/memcgd/cgroupfs"
	"github.com/memcgd/memcgd/memcg"
)

// Observe reads c's state as memcgd sees it (cgroupfs.Reader.Observe):
// usage, limit, failcnt, the hierarchical memory.stat figures and the
// memory PSI of its unified mirror.
func (l *Lab) Observe(c *Cgroup) (memcg.Stat, error) {
	return cgroupfs.NewReader(l.Layout).Observe(c.Path)
}

// Sampler observes one cgroup at a fixed interval on its own goroutine
// and keeps one value per observation.
type Sampler struct {
	stop chan struct{}
	done chan struct{}
	vals Series
	err  error
}

// Sample starts sampling value(stat of c) every interval until Stop.
func (l *Lab) Sample(c *Cgroup, every time.Duration, value func(memcg.Stat) uint64) *Sampler {
	s := &Sampler{stop: make(chan struct{}), done: make(chan struct{})}
	r := cgroupfs.NewReader(l.Layout)
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			st, err := r.Observe(c.Path)
			if err != nil {
				s.err = err
				return
			}
			s.vals = append(s.vals, value(st))
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Stop ends the sampling and returns the samples, or the error that ended
// it early.
func (s *Sampler) Stop() (Series, error) {
	close(s.stop)
	<-s.done
	return s.vals, s.err
}

// Series is a sequence of samples.
type Series []uint64

// Summary is a series' maximum, 99th percentile (nearest rank) and mean.
type Summary struct {
	N        int
	Max, P99 uint64
	Mean     float64
}

// Summary summarises s.
func (s Series) Summary() Summary {
	if len(s) == 0 {
		return Summary{}
	}
	sorted := slices.Clone(s)
	slices.Sort(sorted)
	var sum float64
	for _, v := range s {
		sum += float64(v)
	}
	rank := int(math.Ceil(0.99*float64(len(sorted)))) - 1
	return Summary{N: len(s), Max: sorted[len(sorted)-1], P99: sorted[rank], Mean: sum / float64(len(s))}
}
