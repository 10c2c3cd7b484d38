package hostcall

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/sched"
)

// fakeHost records the calls made on it. Its clock moves on by a
// millisecond at each reading, so that a result's At tells when it was
// read.
type fakeHost struct {
	calls   []string
	now     time.Time
	failOn  host.Cgroup // Observe fails for it
	dirtied host.DirtyCounts
}

func (h *fakeHost) record(format string, a ...any) {
	h.calls = append(h.calls, fmt.Sprintf(format, a...))
}

func (h *fakeHost) Cgroups(context.Context) ([]host.Cgroup, error) {
	h.record("list")
	return []host.Cgroup{"/", "/a"}, nil
}

func (h *fakeHost) Observe(_ context.Context, cg host.Cgroup) (memcg.Stat, error) {
	h.record("observe %s", cg)
	if cg == h.failOn {
		return memcg.Stat{}, host.ErrVanished
	}
	return memcg.Stat{Usage: uint64(len(cg))}, nil
}

func (h *fakeHost) Reclaim(_ context.Context, cg host.Cgroup, n, usage uint64) (uint64, error) {
	h.record("reclaim %s %d %d", cg, n, usage)
	return n / 2, nil
}

func (h *fakeHost) WriteOut(_ context.Context, cg host.Cgroup, dirty uint64) (host.WriteOut, error) {
	h.record("write out %s %d", cg, dirty)
	return host.WriteOut{Files: 1, Bytes: dirty}, nil
}

func (h *fakeHost) Flush(_ context.Context, cg host.Cgroup) error {
	h.record("flush %s", cg)
	return host.ErrNothingToFlush
}

func (h *fakeHost) Now() time.Time {
	h.now = h.now.Add(time.Millisecond)
	return h.now
}

// capableHost can also freeze, pace and count what a cgroup dirtied.
type capableHost struct{ *fakeHost }

func (h capableHost) Freeze(_ context.Context, cg host.Cgroup) (host.Frozen, error) {
	h.record("freeze %s", cg)
	return &fakeEpisode{h: h.fakeHost}, nil
}

func (h capableHost) Pace(_ context.Context, cg host.Cgroup, quota, period time.Duration) (host.Paced, error) {
	h.record("pace %s %v/%v", cg, quota, period)
	return &fakeEpisode{h: h.fakeHost}, nil
}

func (h capableHost) DirtyCounts(_ context.Context, cg host.Cgroup) (host.DirtyCounts, error) {
	h.record("dirty counts %s", cg)
	return h.dirtied, nil
}

// fakeEpisode is both a freezer's and a pace's episode.
type fakeEpisode struct{ h *fakeHost }

func (e *fakeEpisode) Thaw() error     { e.h.record("thaw"); return nil }
func (e *fakeEpisode) Refreeze() error { e.h.record("refreeze"); return nil }
func (e *fakeEpisode) End() error      { e.h.record("end"); return nil }
func (e *fakeEpisode) Set(quota, period time.Duration) error {
	e.h.record("set %v/%v", quota, period)
	return nil
}
func (e *fakeEpisode) CPU() (time.Duration, error) {
	e.h.record("cpu")
	return 7 * time.Millisecond, nil
}
func (e *fakeEpisode) Throttled() (time.Duration, error) {
	e.h.record("throttled")
	return 3 * time.Millisecond, nil
}
func (e *fakeEpisode) Unpaced() (int, bool) { e.h.record("unpaced"); return 2, true }

type fakeDriver struct{ h *fakeHost }

func (d fakeDriver) Watch(cg host.Cgroup, w host.Wake) error {
	d.h.record("watch %s %d", cg, w.UsageAbove)
	return nil
}

func (d fakeDriver) Forget(cg host.Cgroup) error {
	d.h.record("forget %s", cg)
	return nil
}

// Each op is the host's call, or the driver's, that its kind names, and
// nothing else; its result carries what the call returned.
func TestDoCallsWhatTheOpNames(t *testing.T) {
	ep := &fakeEpisode{}
	for _, tc := range []struct {
		name  string
		op    sched.Op
		plain bool // a host with no capability beyond host.Host
		calls []string
		check func(t *testing.T, r sched.Result)
	}{
		{name: "list", op: sched.Op{Kind: sched.List}, calls: []string{"list"},
			check: func(t *testing.T, r sched.Result) {
				if !slices.Equal(r.Cgroups, []host.Cgroup{"/", "/a"}) {
					t.Errorf("Cgroups = %v", r.Cgroups)
				}
			}},
		{name: "observe a chain, the tracker's count and the pace's readings",
			op:    sched.Op{Kind: sched.Observe, Cgroup: "/a/b", Read: []host.Cgroup{"/a/b", "/a"}, Dirtied: true, Paced: ep, Held: true},
			calls: []string{"observe /a/b", "observe /a", "dirty counts /a/b", "cpu", "throttled", "unpaced"},
			check: func(t *testing.T, r sched.Result) {
				if len(r.Stats) != 2 || r.Stats[0].Usage != 4 || r.Stats[1].Usage != 2 {
					t.Errorf("Stats = %+v, want /a/b's then /a's", r.Stats)
				}
				if !r.HasDirtied || r.Dirtied.Dirtied != 5 || r.PacedCPU != 7*time.Millisecond || r.PacedThrottled != 3*time.Millisecond || !r.UnpacedKnown || r.Unpaced != 2 {
					t.Errorf("result = %+v, want the dirtied count, the pace's CPU, hold and escapes", r)
				}
			}},
		{name: "observe without the tracker's count or a hold asked",
			op:    sched.Op{Kind: sched.Refresh, Cgroup: "/a", Read: []host.Cgroup{"/a"}, Paced: ep},
			calls: []string{"observe /a", "cpu", "unpaced"},
			check: func(t *testing.T, r sched.Result) {
				if r.HasDirtied || r.PacedThrottled != 0 {
					t.Errorf("result = %+v, want no dirtied count and no hold read", r)
				}
			}},
		{name: "a host that counts nothing dirtied",
			op: sched.Op{Kind: sched.Observe, Cgroup: "/a", Read: []host.Cgroup{"/a"}, Dirtied: true}, plain: true,
			calls: []string{"observe /a"},
			check: func(t *testing.T, r sched.Result) {
				if r.HasDirtied || r.Err != nil {
					t.Errorf("result = %+v, want no dirtied count and no error", r)
				}
			}},
		{name: "freeze", op: sched.Op{Kind: sched.Freeze, Cgroup: "/a"}, calls: []string{"freeze /a"},
			check: func(t *testing.T, r sched.Result) {
				if r.Episode == nil {
					t.Error("no episode")
				}
			}},
		{name: "thaw", op: sched.Op{Kind: sched.Thaw, Episode: ep}, calls: []string{"thaw"}},
		{name: "refreeze", op: sched.Op{Kind: sched.Refreeze, Episode: ep}, calls: []string{"refreeze"}},
		{name: "end", op: sched.Op{Kind: sched.End, Episode: ep}, calls: []string{"end"}},
		{name: "pace", op: sched.Op{Kind: sched.Pace, Cgroup: "/a", Quota: time.Millisecond, Period: 10 * time.Millisecond},
			calls: []string{"pace /a 1ms/10ms"},
			check: func(t *testing.T, r sched.Result) {
				if r.Paced == nil {
					t.Error("no pace episode")
				}
			}},
		{name: "set pace", op: sched.Op{Kind: sched.SetPace, Paced: ep, Quota: 2 * time.Millisecond, Period: 20 * time.Millisecond},
			calls: []string{"set 2ms/20ms"}},
		{name: "unpace reads the hold before it ends", op: sched.Op{Kind: sched.Unpace, Paced: ep},
			calls: []string{"throttled", "end"},
			check: func(t *testing.T, r sched.Result) {
				if r.PacedThrottled != 3*time.Millisecond {
					t.Errorf("PacedThrottled = %v, want 3ms", r.PacedThrottled)
				}
			}},
		{name: "write out", op: sched.Op{Kind: sched.WriteOut, Cgroup: "/a", Bytes: 4096}, calls: []string{"write out /a 4096"},
			check: func(t *testing.T, r sched.Result) {
				if r.WriteOut.Bytes != 4096 {
					t.Errorf("WriteOut = %+v", r.WriteOut)
				}
			}},
		{name: "flush", op: sched.Op{Kind: sched.Flush, Cgroup: "/a"}, calls: []string{"flush /a"},
			check: func(t *testing.T, r sched.Result) {
				if !errors.Is(r.Err, host.ErrNothingToFlush) {
					t.Errorf("Err = %v, want the host's ErrNothingToFlush", r.Err)
				}
			}},
		{name: "reclaim", op: sched.Op{Kind: sched.Reclaim, Cgroup: "/a", Bytes: 100, Usage: 900}, calls: []string{"reclaim /a 100 900"},
			check: func(t *testing.T, r sched.Result) {
				if r.Reclaimed != 50 {
					t.Errorf("Reclaimed = %d, want 50", r.Reclaimed)
				}
			}},
		{name: "watch, through the driver", op: sched.Op{Kind: sched.Watch, Cgroup: "/a", Wake: host.Wake{UsageAbove: 9}},
			calls: []string{"watch /a 9"}},
		{name: "forget, through the driver", op: sched.Op{Kind: sched.Forget, Cgroup: "/a"}, calls: []string{"forget /a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fh := &fakeHost{now: time.Unix(100, 0), dirtied: host.DirtyCounts{Dirtied: 5}}
			*ep = fakeEpisode{h: fh}
			var h host.Host = capableHost{fh}
			if tc.plain {
				h = fh
			}
			r := Do(context.Background(), h, fakeDriver{fh}, tc.op)
			if !slices.Equal(fh.calls, tc.calls) {
				t.Errorf("calls = %q, want %q", fh.calls, tc.calls)
			}
			if r.Op.Kind != tc.op.Kind || r.Op.Cgroup != tc.op.Cgroup {
				t.Errorf("Op = %v %s, want the op carried out", r.Op.Kind, r.Op.Cgroup)
			}
			if r.At.IsZero() {
				t.Error("At is zero, want the host's time")
			}
			if r.Took != 0 {
				t.Errorf("Took = %v, want it left to the caller", r.Took)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

// An observation's time is taken once its files are read, before the
// readings beside them; a failed read names the cgroup, ends the op with
// what was read before it, and reads nothing more.
func TestDoObserve(t *testing.T) {
	fh := &fakeHost{now: time.Unix(100, 0), dirtied: host.DirtyCounts{Dirtied: 5}}
	ep := &fakeEpisode{h: fh}
	op := sched.Op{Kind: sched.Observe, Cgroup: "/a/b", Read: []host.Cgroup{"/a/b", "/a"}, Dirtied: true, Paced: ep}
	r := Do(context.Background(), capableHost{fh}, fakeDriver{fh}, op)
	if want := time.Unix(100, 0).Add(time.Millisecond); !r.At.Equal(want) {
		t.Errorf("At = %v, want %v: the first reading of the clock, after the files", r.At, want)
	}

	fh = &fakeHost{now: time.Unix(100, 0), failOn: "/a"}
	ep.h = fh
	r = Do(context.Background(), capableHost{fh}, fakeDriver{fh}, op)
	if !errors.Is(r.Err, host.ErrVanished) || r.Err.Error() != "observe /a: "+host.ErrVanished.Error() {
		t.Errorf("Err = %v, want observe /a: wrapping ErrVanished", r.Err)
	}
	if len(r.Stats) != 1 || r.HasDirtied || r.PacedCPU != 0 {
		t.Errorf("result = %+v, want /a/b's reading alone", r)
	}
	if want := []string{"observe /a/b", "observe /a"}; !slices.Equal(fh.calls, want) {
		t.Errorf("calls = %q, want %q", fh.calls, want)
	}
	if r.At.IsZero() {
		t.Error("At is zero on a failed observation, want the host's time")
	}
}

// A host without a freezer or a pacer fails those ops with an error that
// says so and wraps errors.ErrUnsupported, and calls nothing.
func TestDoWithoutTheCapability(t *testing.T) {
	for _, op := range []sched.Op{
		{Kind: sched.Freeze, Cgroup: "/a"},
		{Kind: sched.Pace, Cgroup: "/a", Quota: time.Millisecond, Period: 10 * time.Millisecond},
	} {
		fh := &fakeHost{now: time.Unix(100, 0)}
		r := Do(context.Background(), fh, fakeDriver{fh}, op)
		if !errors.Is(r.Err, errors.ErrUnsupported) {
			t.Errorf("%v: Err = %v, want one wrapping errors.ErrUnsupported", op.Kind, r.Err)
		}
		if len(fh.calls) != 0 || r.Episode != nil || r.Paced != nil {
			t.Errorf("%v: calls %q, episode %v, paced %v; want none", op.Kind, fh.calls, r.Episode, r.Paced)
		}
	}
}
