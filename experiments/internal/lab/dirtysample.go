package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/format"
)

// DirtySampler samples one cgroup's dirty+writeback bytes and whether it
// is frozen, at a fine interval: an unpaced writer fills a 16 MiB dirty
// limit in a few milliseconds, which Sample, reading five files per
// cgroup and opening each anew, cannot follow. It keeps the files open
// and re-reads them from offset 0 (kernfs regenerates a seq_file read at
// offset 0), on a goroutine locked to its thread.
type DirtySampler struct {
	stop    chan struct{}
	done    chan struct{}
	samples DirtySamples
	err     error
}

// DirtySamples are a DirtySampler's observations.
type DirtySamples struct {
	// At is when each observation was made, since SampleDirty.
	At []time.Duration
	// Bytes is the cgroup's dirty+writeback (hierarchical memory.stat:
	// total_dirty + total_writeback on v1, file_dirty + file_writeback
	// on v2) at each observation.
	Bytes Series
	// Writeback is the part of Bytes under writeback: submitted to the
	// device, not yet written.
	Writeback []uint64
	// Frozen says whether the cgroup was frozen (cgroup.freeze 1 or
	// freezer.state not THAWED) at each observation.
	Frozen []bool
}

// Gaps is the median and 99th percentile of the intervals between two
// observations: the sampling interval achieved.
func (s DirtySamples) Gaps() (p50, p99 time.Duration) {
	return Samples{At: s.At}.Gaps()
}

// FrozenShare is the share of observations with the cgroup frozen, in
// percent.
func (s DirtySamples) FrozenShare() float64 {
	return Samples{Frozen: [][]bool{s.Frozen}}.FrozenShare(0)
}

// SampleDirty starts sampling c every interval until Stop.
func (l *Lab) SampleDirty(every time.Duration, c *Cgroup) (*DirtySampler, error) {
	stat, err := os.Open(filepath.Join(c.Dir, "memory.stat"))
	if err != nil {
		return nil, fmt.Errorf("sample %s: %w", c.Path, err)
	}
	var freeze, state *os.File
	if c.Unified != "" {
		if freeze, err = os.Open(filepath.Join(c.Unified, "cgroup.freeze")); err != nil {
			stat.Close()
			return nil, fmt.Errorf("sample %s: %w", c.Path, err)
		}
	}
	if c.Freezer != "" {
		if state, err = os.Open(filepath.Join(c.Freezer, "freezer.state")); err != nil {
			stat.Close()
			if freeze != nil {
				freeze.Close()
			}
			return nil, fmt.Errorf("sample %s: %w", c.Path, err)
		}
	}
	s := &DirtySampler{stop: make(chan struct{}), done: make(chan struct{})}
	v2 := c.v2
	start := time.Now()
	go func() {
		defer close(s.done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer stat.Close()
		if freeze != nil {
			defer freeze.Close()
		}
		if state != nil {
			defer state.Close()
		}
		buf := make([]byte, 64<<10)
		small := make([]byte, 64)
		var m1 format.MemoryStatV1
		var m2 format.MemoryStatV2
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			at := time.Since(start)
			n, err := stat.ReadAt(buf, 0)
			if n == 0 && err != nil {
				s.err = fmt.Errorf("read %s: %w", stat.Name(), err)
				return
			}
			var bytes, wb uint64
			if v2 {
				err = format.ParseMemoryStatV2(buf[:n], &m2)
				bytes, wb = m2.FileDirty+m2.FileWriteback, m2.FileWriteback
			} else {
				err = format.ParseMemoryStatV1(buf[:n], &m1)
				bytes, wb = m1.Total.Dirty+m1.Total.Writeback, m1.Total.Writeback
			}
			if err != nil {
				s.err = fmt.Errorf("parse %s: %w", stat.Name(), err)
				return
			}
			frozen := false
			if freeze != nil {
				if n, _ := freeze.ReadAt(small, 0); n > 0 && strings.TrimSpace(string(small[:n])) == "1" {
					frozen = true
				}
			}
			if state != nil {
				if n, _ := state.ReadAt(small, 0); n > 0 && strings.TrimSpace(string(small[:n])) != "THAWED" {
					frozen = true
				}
			}
			s.samples.At = append(s.samples.At, at)
			s.samples.Bytes = append(s.samples.Bytes, bytes)
			s.samples.Writeback = append(s.samples.Writeback, wb)
			s.samples.Frozen = append(s.samples.Frozen, frozen)
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s, nil
}

// Stop ends the sampling and returns the observations, or the error that
// ended it early.
func (s *DirtySampler) Stop() (DirtySamples, error) {
	close(s.stop)
	<-s.done
	return s.samples, s.err
}

// Excursions describes the stretches in which a sampled series was above
// a level: how many, the longest (from the first sample above to the
// first sample back at or below, or to the last sample), and the share of
// the sampled time spent above.
type Excursions struct {
	N       int
	Longest time.Duration
	Above   time.Duration // the time above, in all
	Share   float64       // percent of the time from the first to the last sample
}

// Above finds the excursions of the series above level. Each sample
// stands for the time until the next one.
func (s DirtySamples) Above(level uint64) Excursions {
	var e Excursions
	if len(s.At) < 2 {
		return e
	}
	var above, start time.Duration
	in := false
	for i := range s.At {
		over := s.Bytes[i] > level
		switch {
		case over && !in:
			in, start = true, s.At[i]
			e.N++
		case !over && in:
			in = false
			e.Longest = max(e.Longest, s.At[i]-start)
		}
		if over && i+1 < len(s.At) {
			above += s.At[i+1] - s.At[i]
		}
	}
	last := s.At[len(s.At)-1]
	if in {
		e.Longest = max(e.Longest, last-start)
	}
	e.Above = above
	e.Share = float64(above) / float64(last-s.At[0]) * 100
	return e
}

// FreezeDelays is, for each stretch in which the cgroup ran (was not
// frozen) and its dirty+writeback rose above level, the time from the
// first sample above level to the first sample with the cgroup frozen
// again: how late the throttle caught an overshoot. A stretch that the
// end of the sampling cuts off is not counted.
func (s DirtySamples) FreezeDelays(level uint64) Series {
	var out Series
	var overAt time.Duration
	over := false
	for i, at := range s.At {
		switch {
		case s.Frozen[i] && over:
			out = append(out, uint64(at-overAt))
			over = false
		case s.Frozen[i]:
		case !over && s.Bytes[i] > level:
			over, overAt = true, at
		}
	}
	return out
}
