package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/resolve"
)

// A read-ahead hands out the list's cgroups, and each one's reading, in
// the list's order, whatever order its workers read them in; reads an
// ancestor outside the list directly; drops a reading the walk never asked
// for; reads no cgroup twice; ends with the list; and leaves no goroutine
// behind, however far the walk got.
func TestReadAhead(t *testing.T) {
	cgs := []host.Cgroup{"/a", "/a/b", "/a/b/c", "/a/d", "/a/e"}
	gone := errors.New("vanished")
	tests := []struct {
		name    string
		workers int
		batch   int // cgroups read together
		window  int // batches
		// failAt makes the walk of this cgroup fail before it is asked
		// for, as when an ancestor vanished: the walk skips it.
		failAt host.Cgroup
		// walk is how many cgroups the walk takes before it stops.
		walk int
		// slow sends the list a cgroup a millisecond, as a walk finds
		// them, rather than all at once: batches go out part full.
		slow bool
		want []string
	}{
		{name: "one worker", workers: 1, batch: 1, window: 1, walk: 5,
			want: []string{"/a 1", "/a/b 2", "/a/b/c 3", "/a/d 4", "/a/e 5"}},
		{name: "more workers than the window", workers: 4, batch: 1, window: 2, walk: 5,
			want: []string{"/a 1", "/a/b 2", "/a/b/c 3", "/a/d 4", "/a/e 5"}},
		{name: "a window past the end", workers: 2, batch: 1, window: 64, walk: 5,
			want: []string{"/a 1", "/a/b 2", "/a/b/c 3", "/a/d 4", "/a/e 5"}},
		{name: "batches, the last one short", workers: 2, batch: 2, window: 1, walk: 5,
			want: []string{"/a 1", "/a/b 2", "/a/b/c 3", "/a/d 4", "/a/e 5"}},
		{name: "a batch past the end", workers: 2, batch: 16, window: 4, walk: 5,
			want: []string{"/a 1", "/a/b 2", "/a/b/c 3", "/a/d 4", "/a/e 5"}},
		{name: "a walk that fails before a cgroup", workers: 2, batch: 1, window: 2, walk: 5, failAt: "/a/b/c",
			want: []string{"/a 1", "/a/b 2", "/a/d 4", "/a/e 5"}},
		{name: "a walk that fails at a batch's end", workers: 2, batch: 3, window: 1, walk: 5, failAt: "/a/b/c",
			want: []string{"/a 1", "/a/b 2", "/a/d 4", "/a/e 5"}},
		{name: "a list that arrives slowly", workers: 2, batch: 4, window: 2, walk: 5, slow: true,
			want: []string{"/a 1", "/a/b 2", "/a/b/c 3", "/a/d 4", "/a/e 5"}},
		{name: "a walk that stops early", workers: 2, batch: 1, window: 3, walk: 2,
			want: []string{"/a 1", "/a/b 2"}},
		{name: "a walk that stops within a batch", workers: 2, batch: 2, window: 1, walk: 3,
			want: []string{"/a 1", "/a/b 2", "/a/b/c 3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				reads := map[host.Cgroup]int{}
				// A cgroup's reading is its place in cgs, plus one; the
				// root's, outside the list, 100.
				observe := func(_ context.Context, cg host.Cgroup) (memcg.Stat, error) {
					mu.Lock()
					reads[cg]++
					mu.Unlock()
					if i := slices.Index(cgs, cg); i >= 0 {
						return memcg.Stat{Usage: uint64(i + 1)}, nil
					}
					return memcg.Stat{Usage: 100}, nil
				}
				list := make(chan host.Cgroup, len(cgs))
				send := func() {
					for _, cg := range cgs {
						if tt.slow {
							time.Sleep(time.Millisecond)
						}
						list <- cg
					}
					close(list)
				}
				if tt.slow {
					go send()
				} else {
					send()
				}
				a := newReadAhead(t.Context(), observe, list, tt.workers, tt.batch, tt.window)
				cache := resolve.NewPathCache(a.Observe(observe))
				var got []string
				for range tt.walk {
					cg, ok := a.Next()
					if !ok {
						t.Fatalf("the list ended after %d cgroups, want %d", len(got), tt.walk)
					}
					var err error
					var s memcg.Stat
					if cg == tt.failAt {
						err = gone
					} else {
						s, _, err = resolve.Resolve(t.Context(), cg, cache.Observe, func(host.Cgroup) memcg.Knobs { return memcg.Knobs{} })
					}
					if err == nil {
						got = append(got, fmt.Sprintf("%s %d", cg, s.Usage))
					}
				}
				if tt.walk == len(cgs) {
					if cg, ok := a.Next(); ok {
						t.Errorf("Next after the list's end returned %s", cg)
					}
				}
				a.Stop()
				if !slices.Equal(got, tt.want) {
					t.Errorf("the walk got %q, want %q", got, tt.want)
				}
				if reads["/"] != 1 {
					t.Errorf("the root, outside the list, was read %d times, want once", reads["/"])
				}
				for _, cg := range cgs {
					if reads[cg] > 1 {
						t.Errorf("%s was read %d times, want at most once", cg, reads[cg])
					}
				}
			})
		})
	}
}
