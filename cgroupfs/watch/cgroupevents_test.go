package watch_test

import (
	"context"
	"maps"
	"path"
	"strconv"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/dirtytrack"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/cgroupfs/watch"
	"github.com/memcgd/memcgd/host"
)

// startCgroupEvents makes a cgroup p and starts FS.CgroupEvents over the
// subtree it heads: from the tracker's cgroup tracepoints with tracker
// (it must load with them), else from inotify. cancel ends the reports;
// the test's cleanup does too.
func startCgroupEvents(t *testing.T, l layout.Layout, tracker bool) (p *cgrouptest.Cgroup, events <-chan host.CgroupEvent, cancel context.CancelFunc) {
	t.Helper()
	var tr *dirtytrack.Tracker
	if tracker {
		tr = cgrouptest.LoadTracker(t)
		if !tr.CgroupEvents() {
			t.Fatal("the tracker loaded without its cgroup mkdir/rmdir programs")
		}
	}
	p = cgrouptest.New(t, l, 0)
	fs := cgrouptest.FS(t, l, p.Path, nil, tr)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	events, err := fs.CgroupEvents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return p, events, cancel
}

// New and removed cgroups beneath the managed subtree are reported through
// FS.CgroupEvents within reportBound() (100 ms on the host), from the
// tracker's tracepoints and, without it, from inotify.
func TestFSCgroupEventsWithin100ms(t *testing.T) {
	l := cgrouptest.Layout(t)
	for _, tc := range []struct {
		name    string
		tracker bool
	}{{"tracker", true}, {"inotify", false}} {
		t.Run(tc.name, func(t *testing.T) {
			p, events, cancel := startCgroupEvents(t, l, tc.tracker)
			in := make(chan received, 1<<12)
			go func() {
				for ev := range events {
					if ev.Cgroup == p.Path && !ev.Removed {
						// p's own mkdir, made before CgroupEvents
						// began, may still be in the tracker's ring.
						continue
					}
					in <- received{watch.CgroupEvent{Cgroup: ev.Cgroup, Removed: ev.Removed, Rescan: ev.Rescan}, time.Now()}
				}
				close(in)
			}()
			// A sibling outside the managed subtree is not reported.
			outside := cgrouptest.New(t, l, 0)
			cs := chains(p.Path, 10)
			created := map[host.Cgroup]time.Time{}
			var got []received
			for i, c := range cs {
				maps.Copy(created, mkdirs(t, l, c))
				if i == 0 {
					outside.Child(t, "stray")
				}
				got = append(got, await(t, in, len(c), 10*time.Second)...)
			}
			checkReports(t, tc.name+" created", got, created, false)
			removed := map[host.Cgroup]time.Time{}
			got = nil
			for _, c := range cs {
				for i := len(c) - 1; i >= 0; i-- {
					if err := rmdir(l.Memory.Dir(c[i])); err != nil {
						t.Fatal(err)
					}
					removed[c[i]] = time.Now()
				}
				got = append(got, await(t, in, len(c), 10*time.Second)...)
			}
			checkReports(t, tc.name+" removed", got, removed, true)
			cancel()
			for range in { // closed once ctx ends
			}
		})
	}
}

// A receiver that falls behind by more than the queue loses reports, and
// is then sent one Rescan, without another report to carry it: the
// forwarder is woken by the drop itself (it once polled for it every
// 10 ms, an idle daemon's 100 wake-ups a second).
func TestFSCgroupEventsOwesARescanWhenTheReceiverFallsBehind(t *testing.T) {
	l := cgrouptest.Layout(t)
	p, events, _ := startCgroupEvents(t, l, true)
	// More cgroups than the queue holds, made while nothing receives:
	// twice as many, so that the queue overflows even when the tracker's
	// ring reader has pushed only half of them when the receiving begins
	// (with one queue's worth and a few more, a reader that lagged let
	// the receiver keep up).
	var cgs []host.Cgroup
	for i := range 2*watch.DefaultNewCgroupsQueue + 64 {
		cgs = append(cgs, host.Cgroup(path.Join(string(p.Path), "c"+strconv.Itoa(i))))
	}
	mkdirs(t, l, cgs)
	deadline := time.After(10 * time.Second)
	reported := 0
	for {
		select {
		case ev := <-events:
			if ev.Rescan {
				if ev.Cgroup != p.Path {
					t.Errorf("Rescan of %s, want the managed subtree %s", ev.Cgroup, p.Path)
				}
				t.Logf("%d of %d cgroups reported, then a Rescan", reported, len(cgs))
				return
			}
			reported++
		case <-deadline:
			t.Fatalf("%d of %d cgroups reported and no Rescan within 10 s", reported, len(cgs))
		}
	}
}
