package main

import (
	"context"
	"sync"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/resolve"
)

// readAhead observes the cgroups of a list on several goroutines, in
// batches of consecutive cgroups, at most window batches ahead of the one
// its caller takes from, so that reading cgroupfs directly keeps every CPU
// in the kernel's file reads while the caller formats and writes in order.
// The list is a channel, so that reading starts while the rest of the list
// is found. A batch costs one hand-off between goroutines however many
// cgroups it holds: a hand-off per cgroup (a wake-up, and the idle CPU
// spinning to steal the woken goroutine) cost more CPU than the reads it
// overlapped.
//
// Next steps through the list in order; Observe hands out the reading of
// the cgroup Next returned; Stop ends the read-ahead, and must be called.
type readAhead struct {
	order chan *batch // the batches in the list's order, at most window
	cur   *batch      // the batch of the cgroup Next returned
	i     int         // its place in cur
	due   bool        // its reading is not taken yet
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

// batch is consecutive cgroups of the list, and their readings once a
// worker has read them.
type batch struct {
	cgs  []host.Cgroup
	read chan []reading // written once
	rs   []reading
}

type reading struct {
	stat memcg.Stat
	err  error
}

// newReadAhead starts reading the cgroups that arrive on list with observe,
// on workers goroutines, in batches of size cgroups.
func newReadAhead(ctx context.Context, observe resolve.Observer, list <-chan host.Cgroup, workers, size, window int) *readAhead {
	ctx, cancel := context.WithCancel(ctx)
	a := &readAhead{order: make(chan *batch, window), stop: cancel}
	jobs := make(chan *batch)
	a.wg.Add(1 + workers)
	go func() {
		defer a.wg.Done()
		defer close(jobs)
		defer close(a.order)
		for {
			b := &batch{read: make(chan []reading, 1)}
			// Wait for a first cgroup, then take what has arrived, up
			// to a full batch.
			select {
			case cg, ok := <-list:
				if !ok {
					return
				}
				b.cgs = append(b.cgs, cg)
			case <-ctx.Done():
				return
			}
		fill:
			for len(b.cgs) < size {
				select {
				case cg, ok := <-list:
					if !ok {
						break fill
					}
					b.cgs = append(b.cgs, cg)
				default:
					break fill
				}
			}
			select {
			case a.order <- b:
			case <-ctx.Done():
				return
			}
			select {
			case jobs <- b:
			case <-ctx.Done():
				return
			}
		}
	}()
	for range workers {
		go func() {
			defer a.wg.Done()
			for b := range jobs {
				rs := make([]reading, len(b.cgs))
				for i, cg := range b.cgs {
					rs[i].stat, rs[i].err = observe(ctx, cg)
				}
				b.read <- rs
			}
		}()
	}
	return a
}

// Next returns the next cgroup of the list, once its batch is read; false
// at the list's end.
func (a *readAhead) Next() (host.Cgroup, bool) {
	a.i++
	if a.cur == nil || a.i == len(a.cur.cgs) {
		b, ok := <-a.order
		if !ok {
			a.cur, a.due = nil, false
			return "", false
		}
		b.rs = <-b.read
		a.cur, a.i = b, 0
	}
	a.due = true
	return a.cur.cgs[a.i], true
}

// Observe is an Observer that gives the reading of the cgroup Next
// returned, once, and reads any other (an ancestor outside the list) with
// observe. A walk over the list in order, each cgroup with its ancestors
// (a resolve.PathCache over it), asks for each cgroup of the list once.
func (a *readAhead) Observe(observe resolve.Observer) resolve.Observer {
	return func(ctx context.Context, cg host.Cgroup) (memcg.Stat, error) {
		if a.due && cg == a.cur.cgs[a.i] {
			a.due = false
			r := a.cur.rs[a.i]
			return r.stat, r.err
		}
		return observe(ctx, cg)
	}
}

// Stop ends the read-ahead and waits for its goroutines.
func (a *readAhead) Stop() {
	a.stop()
	a.wg.Wait()
}
