package main

import (
	"context"
	"sync"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/resolve"
)

// readAhead observes cgroups on several goroutines, at most window ahead
// of the one its caller takes next, so that reading cgroupfs directly
// keeps every CPU in the kernel's file reads while the caller formats and
// writes in order. Observe hands the readings out in the order of cgs; Stop
// ends the read-ahead, and must be called.
type readAhead struct {
	cgs   []host.Cgroup
	slots []chan reading // one per cgroup, each written once
	free  chan struct{}  // window tokens: one per cgroup read and not taken
	next  int
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

type reading struct {
	stat memcg.Stat
	err  error
}

// newReadAhead starts reading cgs with observe on workers goroutines.
func newReadAhead(ctx context.Context, observe resolve.Observer, cgs []host.Cgroup, workers, window int) *readAhead {
	ctx, cancel := context.WithCancel(ctx)
	a := &readAhead{cgs: cgs, slots: make([]chan reading, len(cgs)), free: make(chan struct{}, window), stop: cancel}
	for i := range a.slots {
		a.slots[i] = make(chan reading, 1)
	}
	for range window {
		a.free <- struct{}{}
	}
	jobs := make(chan int)
	a.wg.Add(1 + workers)
	go func() {
		defer a.wg.Done()
		defer close(jobs)
		for i := range cgs {
			select {
			case <-a.free:
			case <-ctx.Done():
				return
			}
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	for range workers {
		go func() {
			defer a.wg.Done()
			for i := range jobs {
				s, err := observe(ctx, cgs[i])
				a.slots[i] <- reading{s, err}
			}
		}()
	}
	return a
}

// Observe is an Observer that gives the reading of the cgroup due next
// from the read-ahead, and reads any other (an ancestor outside cgs) with
// observe. A walk over cgs in order, each with its ancestors (a
// resolve.PathCache over it), asks for each of cgs once, in turn.
func (a *readAhead) Observe(observe resolve.Observer) resolve.Observer {
	return func(ctx context.Context, cg host.Cgroup) (memcg.Stat, error) {
		if r, ok := a.take(cg); ok {
			return r.stat, r.err
		}
		return observe(ctx, cg)
	}
}

// Skip drops the reading of cg if it is the one due next: its walk failed
// before it was asked for (an ancestor vanished).
func (a *readAhead) Skip(cg host.Cgroup) { a.take(cg) }

// take waits for and hands out the reading of cg if it is the one due
// next, freeing its place in the window.
func (a *readAhead) take(cg host.Cgroup) (reading, bool) {
	if a.next >= len(a.cgs) || cg != a.cgs[a.next] {
		return reading{}, false
	}
	r := <-a.slots[a.next]
	a.slots[a.next] = nil
	a.next++
	a.free <- struct{}{}
	return r, true
}

// Stop ends the read-ahead and waits for its goroutines.
func (a *readAhead) Stop() {
	a.stop()
	a.wg.Wait()
}
