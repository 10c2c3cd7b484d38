package sched

import (
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/memcgd/memcgd/config"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/policy"
	"github.com/memcgd/memcgd/state"
)

type stateStatus = state.Status

const ms = time.Millisecond

// dirtyConfig is the default policy with dirty_bytes 16M,
// dirty_background_bytes 8M and no background reclaim.
func dirtyConfig() *config.Config {
	cfg := config.Default()
	cfg.Defaults = memcg.Knobs{DirtyBytes: 16 * mib, DirtyBackgroundBytes: 8 * mib, WritebackFirst: true}
	return cfg
}

func TestTheFirstListingStepsEveryCgroupOnceThenTheDaemonIsReady(t *testing.T) {
	w := newWorld(t, Config{}, "/", root, "/a", memcg.Stat{Limit: 100 * mib}, "/b", memcg.Stat{Limit: memcg.NoLimit})
	if rd := w.c.Ready(); rd.Scanned || len(rd.Ops) != 1 || rd.Ops[0].Kind != List {
		t.Fatalf("at start: Ready %+v, want one List and not scanned", rd)
	} else {
		w.c.Advance(w.now, w.do(rd.Ops[0]))
	}
	w.settle()
	if !w.scanned {
		t.Error("every cgroup was stepped once, but Ready never said Scanned")
	}
	for _, cg := range []host.Cgroup{"/", "/a", "/b"} {
		if n := w.count(Observe, cg); n != 1 {
			t.Errorf("%s observed %d times by the first listing, want 1", cg, n)
		}
	}
	if s, _ := w.statusOf("/a"); !s.Managed {
		t.Error("/a (limited) not managed")
	}
	if s, _ := w.statusOf("/b"); s.Managed {
		t.Error("/b (unlimited, limited_only) managed")
	}
}

func TestSeed004WriteOutPastTheBackgroundThresholdOnly(t *testing.T) {
	w := newWorld(t, Config{}, "/", root,
		"/a", memcg.Stat{Limit: 100 * mib, Usage: 60 * mib, File: 50 * mib, Dirty: 20 * mib}, // 5 % of ~90M
		"/b", memcg.Stat{Limit: 100 * mib, Usage: 60 * mib, File: 50 * mib, Dirty: 1 * mib})
	w.settle()
	if w.count(WriteOut, "/a") != 1 || w.count(WriteOut, "/b") != 0 || w.count(Flush, "/a") != 0 {
		t.Errorf("write-outs /a %d /b %d, flushes /a %d; want /a written out once, /b not, nothing flushed",
			w.count(WriteOut, "/a"), w.count(WriteOut, "/b"), w.count(Flush, "/a"))
	}
	if s, _ := w.statusOf("/a"); s.Counters.WriteOuts != 1 || s.Counters.WriteOutBytes != 20*mib || s.Counters.WriteOutsYielded != 0 {
		t.Errorf("/a counters %+v, want one write-out of 20 MiB, not yielded", s.Counters)
	}
}

// A write-out the host says yielded to another task's syncs counts as
// such.
func TestAWriteOutThatYieldedIsCounted(t *testing.T) {
	w := newWorld(t, Config{}, "/", root,
		"/a", memcg.Stat{Limit: 100 * mib, Usage: 60 * mib, File: 50 * mib, Dirty: 20 * mib})
	w.yield = true
	w.settle()
	if s, _ := w.statusOf("/a"); s.Counters.WriteOuts != 1 || s.Counters.WriteOutsYielded != 1 {
		t.Errorf("/a counters %+v, want one write-out, yielded", s.Counters)
	}
}

func TestSeed001ReclaimFromLowToHighInStepsOfOneRun(t *testing.T) {
	limit := uint64(500 * mib)
	wm := memcg.Knobs{MinFreeKbytes: memcg.MinFreeAuto}.Watermarks(limit)
	w := newWorld(t, Config{ReclaimStep: 1 * mib}, "/", root, "/a", memcg.Stat{Limit: limit, Usage: limit - 1*mib, File: 400 * mib})
	w.reclaim = func(cg host.Cgroup, n uint64) (uint64, error) {
		w.set(cg, func(s *memcg.Stat) { s.Usage -= n; s.File -= n })
		return n, nil
	}
	w.advance(time.Second)
	s, _ := w.statusOf("/a")
	if s.Counters.ReclaimRuns != 1 {
		t.Errorf("pgoutrun %d, want one run from low to high", s.Counters.ReclaimRuns)
	}
	if free := w.stats["/a"].Free(); free < wm.High || free > wm.High+1*mib {
		t.Errorf("free %d after the run, want the high watermark %d", free, wm.High)
	}
	if n := w.count(Reclaim, "/a"); n < 2 {
		t.Errorf("%d reclaim ops, want steps of at most ReclaimStep", n)
	}
}

func TestSeed000ReclaimWritesBackTheCgroupsOwnFilesFirst(t *testing.T) {
	limit := uint64(500 * mib)
	// Below low_wmark, its page cache mostly dirty (under its 5 %
	// background): reclaim cannot be met from clean pages.
	w := newWorld(t, Config{}, "/", root, "/a", memcg.Stat{Limit: limit, Usage: limit - 1*mib, File: 2 * mib, Dirty: 1 * mib, Anon: limit - 3*mib})
	w.settle()
	if w.count(WriteOut, "/a") != 1 || w.count(Flush, "/a") != 0 {
		t.Errorf("write-outs %d flushes %d: want the cgroup's own files written out, no full flush", w.count(WriteOut, "/a"), w.count(Flush, "/a"))
	}
}

func TestOneFullFlushOnTheHostAtATime(t *testing.T) {
	cfg := config.Default()
	cfg.Defaults.WritebackFirst = false
	st := memcg.Stat{Limit: 500 * mib, Usage: 499 * mib, File: 2 * mib, Dirty: 1 * mib, Anon: 497 * mib}
	w := newWorld(t, Config{Policy: cfg}, "/", root, "/a", st, "/b", st)
	w.hold[Flush] = true
	w.settle()
	if a, b := w.count(Flush, "/a"), w.count(Flush, "/b"); a+b != 1 {
		t.Fatalf("flushes /a %d /b %d while the first is in flight, want one in all", a, b)
	}
	// Once it returns, and /a's dirty pages with it, /b gets its own.
	w.hold[Flush] = false
	w.set("/a", func(s *memcg.Stat) { s.Dirty = 0 })
	w.release(Flush)
	w.advance(100 * ms)
	if b := w.count(Flush, "/b"); b == 0 {
		t.Error("/b never flushed once the first flush returned")
	}
}

func TestAFullFlushWithNothingToFlushIsCountedApartAndBacksOff(t *testing.T) {
	cfg := config.Default()
	cfg.Defaults.WritebackFirst = false
	w := newWorld(t, Config{Policy: cfg}, "/", root, "/a", memcg.Stat{Limit: 500 * mib, Usage: 499 * mib, File: 2 * mib, Dirty: 1 * mib, Anon: 497 * mib})
	w.flush = func(host.Cgroup) error { return host.ErrNothingToFlush }
	w.advance(3 * time.Second)
	s, _ := w.statusOf("/a")
	if s.Counters.Errors != 0 || s.Counters.FlushesRefused == 0 {
		t.Errorf("counters %+v: want refusals counted apart, no errors", s.Counters)
	}
	// Waits of 1 s, 2 s: three attempts in 3 s, not one per step.
	if n := w.count(Flush, "/a"); n < 2 || n > 3 {
		t.Errorf("%d flush attempts in 3 s with nothing to flush, want 2-3 (a backoff from 1 s)", n)
	}
}

func TestUnlimitedCgroupsAreLeftAloneUnderLimitedOnly(t *testing.T) {
	w := newWorld(t, Config{}, "/", root, "/u", memcg.Stat{Limit: memcg.NoLimit, Usage: 6 << 30, File: 6 << 30, Dirty: 3 << 30})
	w.advance(time.Second)
	if n := w.count(WriteOut, "/u") + w.count(Flush, "/u") + w.count(Reclaim, "/u") + w.count(Freeze, "/u"); n != 0 {
		t.Errorf("%d actions on an unlimited cgroup", n)
	}
	if w.count(Observe, "/u") != 1 {
		t.Errorf("an unmanaged idle cgroup observed %d times in 1 s, want once (its watch is off)", w.count(Observe, "/u"))
	}
}

func TestStepsGoRoundRobinAcrossCgroups(t *testing.T) {
	// One worker, two cgroups needing many reclaim steps each: both make
	// progress in turn rather than one finishing first.
	limit := uint64(1 << 30)
	cfg := config.Default()
	cfg.Defaults.MinFreeKbytes = 64 << 10 // high 96 MiB: 12 steps of 8 MiB
	w := newWorld(t, Config{Policy: cfg, Workers: 1}, "/", root, "/a", memcg.Stat{Limit: limit, Usage: limit, File: limit}, "/b", memcg.Stat{Limit: limit, Usage: limit, File: limit})
	got := map[host.Cgroup]uint64{}
	w.reclaim = func(cg host.Cgroup, n uint64) (uint64, error) {
		got[cg] += n
		w.set(cg, func(s *memcg.Stat) { s.Usage -= n; s.File -= n })
		return n, nil
	}
	for got["/a"] < 32*mib && got["/b"] < 32*mib {
		w.advance(ms)
	}
	if got["/a"] < 16*mib || got["/b"] < 16*mib {
		t.Errorf("unfair: /a reclaimed %d MiB, /b %d MiB", got["/a"]/mib, got["/b"]/mib)
	}
}

func TestAnActionInFlightHoldsNoLook(t *testing.T) {
	// A write-out that blocks (sync_file_range waiting for the device)
	// does not hold back the cgroup's next look: past its background
	// threshold a fast writer is on its way to the limit.
	w := newWorld(t, Config{Policy: dirtyConfig()}, "/", root, "/a", memcg.Stat{Limit: 100 * mib, Usage: 60 * mib, File: 50 * mib, Dirty: 10 * mib})
	w.hold[WriteOut] = true
	w.settle()
	before := w.count(Observe, "/a")
	w.advance(100 * ms)
	if w.count(Observe, "/a") <= before {
		t.Error("not observed again while its write-out was in flight")
	}
	if n := w.count(WriteOut, "/a"); n != 1 {
		t.Errorf("%d write-outs while the first is in flight, want it alone", n)
	}
}

func TestAWriteOutInFlightHoldsNoReclaim(t *testing.T) {
	// A write-out waiting for a full device queue does not hold up the
	// reclaim of clean pages, nor the other way round: each kind waits
	// only for its own.
	cfg := dirtyConfig()
	cfg.Defaults.MinFreeKbytes = 4 << 10 // low 5 MiB, high 6 MiB
	w := newWorld(t, Config{Policy: cfg}, "/", root, "/a", memcg.Stat{Limit: 100 * mib, Usage: 98 * mib, File: 90 * mib, Dirty: 10 * mib})
	w.hold[WriteOut] = true
	w.settle()
	w.advance(100 * ms)
	if n := w.count(WriteOut, "/a"); n != 1 {
		t.Errorf("%d write-outs while the first is in flight, want it alone", n)
	}
	if n := w.count(Reclaim, "/a"); n < 2 {
		t.Errorf("%d reclaims while a write-out was in flight, want them to go on", n)
	}
}

func TestTheThrottleFreezesAtTheLimitAndItsDeadlineThawsWithoutAStep(t *testing.T) {
	w := newWorld(t, Config{Policy: dirtyConfig(), Freezer: true}, "/", root,
		"/a", memcg.Stat{Limit: 1 << 30, Usage: 100 * mib, File: 100 * mib, Writeback: 17 * mib})
	w.settle()
	if !w.frozen["/a"] || w.count(Freeze, "/a") != 1 {
		t.Fatalf("past the limit: frozen %v, %d freezes; want frozen once", w.frozen["/a"], w.count(Freeze, "/a"))
	}
	if got := w.opsSince(0, "/a"); slices.Index(got, "freeze") > slices.Index(got, "write out") && slices.Contains(got, "write out") {
		t.Errorf("ops %v: want the freeze handed out before the write-out", got)
	}
	// The device drains nothing and no step comes (reads fail as
	// vanished would forget it, so hold the steps): MaxPause thaws it.
	w.hold[Observe] = true
	w.advance(policy.MaxPause + ms)
	if w.frozen["/a"] {
		t.Errorf("still frozen %v after the freeze with no step: HoldFor did not thaw it", policy.MaxPause)
	}
	if got := w.c.Stats().DriverThaws; got != 1 {
		t.Errorf("%d thaws of the Core's own, want 1", got)
	}
	s, _ := w.statusOf("/a")
	if s.Counters.Pauses != 1 || s.Counters.Paused > policy.MaxPause+ms {
		t.Errorf("counters %+v: want one pause of at most MaxPause", s.Counters)
	}
}

func TestStopEndsEveryEpisode(t *testing.T) {
	w := newWorld(t, Config{Policy: dirtyConfig(), Freezer: true}, "/", root,
		"/a", memcg.Stat{Limit: 1 << 30, Usage: 100 * mib, File: 100 * mib, Writeback: 17 * mib})
	w.settle()
	if !w.frozen["/a"] {
		t.Fatal("not frozen")
	}
	w.c.Stop(w.now)
	rd := w.c.Ready()
	w.take(rd)
	if rd.Stopped {
		t.Fatal("Stopped before the End was carried out")
	}
	for _, op := range rd.Ops {
		if op.Kind != End {
			t.Errorf("after Stop: a %v op, want only End", op.Kind)
		}
		w.c.Advance(w.now, w.do(op))
	}
	if rd := w.c.Ready(); !rd.Stopped || len(rd.Ops) != 0 {
		t.Errorf("after the End: Stopped %v, %d ops", rd.Stopped, len(rd.Ops))
	}
	if w.frozen["/a"] {
		t.Error("left frozen after Stop")
	}
	if w.logged(slog.LevelInfo, "throttle episode ended") != 1 {
		t.Error("no line logged for the episode's end")
	}
}

func TestARefusedFreezeIsSaidOnce(t *testing.T) {
	w := newWorld(t, Config{Policy: dirtyConfig(), Freezer: true}, "/", root,
		"/a", memcg.Stat{Limit: 1 << 30, Usage: 100 * mib, File: 100 * mib, Writeback: 17 * mib})
	w.freezeErr["/a"] = errBusy
	w.advance(50 * ms)
	if n := w.count(Freeze, "/a"); n < 3 {
		t.Fatalf("%d freezes tried in 50 ms, want one per look", n)
	}
	if n := w.logged(slog.LevelWarn, "freeze"); n != 1 {
		t.Errorf("a freeze refused at every look logged %d times, want once", n)
	}
}

func TestNoFreezerReachingACgroupIsReportedAndNotTriedAgain(t *testing.T) {
	w := newWorld(t, Config{Policy: dirtyConfig(), Freezer: true}, "/", root,
		"/a", memcg.Stat{Limit: 1 << 30, Usage: 100 * mib, File: 100 * mib, Writeback: 17 * mib})
	w.freezeErr["/a"] = errors.Join(errors.New("no freezer"), errors.ErrUnsupported)
	w.advance(50 * ms)
	if n := w.count(Freeze, "/a"); n != 1 {
		t.Errorf("%d freezes, want one, then none", n)
	}
	if s, _ := w.statusOf("/a"); s.Throttle == "" {
		t.Error("the status does not say the throttle is unavailable")
	}
}

func TestWatcherReports(t *testing.T) {
	// An active writer, looked at every ActiveInterval at most.
	st := memcg.Stat{Limit: 100 * mib, Usage: 60 * mib, File: 50 * mib, Dirty: 10 * mib}
	for _, tt := range []struct {
		name    string
		tracker bool
		want    bool
	}{
		{"without the tracker a report of an active cgroup is a hint: its look comes anyway", false, false},
		{"with the tracker every report is a threshold armed for that moment: stepped at once", true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, Config{Policy: dirtyConfig(), Tracker: tt.tracker}, "/", root, "/a", st)
			w.settle()
			before := w.count(Observe, "/a")
			w.c.Report(w.now, "/a")
			w.settle()
			if stepped := w.count(Observe, "/a") > before; stepped != tt.want {
				t.Errorf("stepped at the report: %v, want %v", stepped, tt.want)
			}
		})
	}
}

func TestAWakeDuringAStepStepsAgainAfterIt(t *testing.T) {
	w := newWorld(t, Config{}, "/", root, "/a", memcg.Stat{Limit: 100 * mib})
	w.settle()
	w.c.Kick(w.now, "/a")
	w.hold[Observe] = true
	w.settle()
	w.c.Kick(w.now, "/a") // during the step
	w.hold[Observe] = false
	before := w.count(Observe, "/a")
	w.release(Observe)
	if w.count(Observe, "/a") != before+1 {
		t.Errorf("a kick during a step: %d more steps after it, want 1", w.count(Observe, "/a")-before)
	}
}

func TestRemovedCgroupsAreForgottenAndARecreatedOneStartsAfresh(t *testing.T) {
	w := newWorld(t, Config{Policy: dirtyConfig(), Freezer: true}, "/", root,
		"/a", memcg.Stat{Limit: 1 << 30, Usage: 100 * mib, File: 100 * mib, Writeback: 17 * mib})
	w.settle()
	old := w.c.cgroups["/a"]
	w.c.CgroupRemoved(w.now, "/a")
	w.settle()
	if w.frozen["/a"] || w.count(Forget, "/a") != 1 {
		t.Errorf("removed: frozen %v, forgotten %d times; want thawed and forgotten once", w.frozen["/a"], w.count(Forget, "/a"))
	}
	if _, ok := w.statusOf("/a"); ok {
		t.Error("a removed cgroup still has a status")
	}
	w.c.CgroupCreated(w.now, "/a")
	w.settle()
	if n := w.c.cgroups["/a"]; n == nil || n == old {
		t.Error("the recreated cgroup has no state of its own")
	}
	// And the looks after its mkdir.
	before := w.count(Observe, "/a")
	w.hold[Freeze] = true // keep it from being throttled meanwhile
	w.advance(time.Second + ms)
	if got := w.count(Observe, "/a") - before; got < len(policy.BornRelooks) {
		t.Errorf("%d looks in the second after its creation, want at least the %d re-looks", got, len(policy.BornRelooks))
	}
}

func TestTheDaemonsOwnCgroupsAreNeverThrottledNorReclaimed(t *testing.T) {
	st := memcg.Stat{Limit: 500 * mib, Usage: 499 * mib, File: 300 * mib, Writeback: 17 * mib}
	w := newWorld(t, Config{Policy: dirtyConfig(), Freezer: true, Self: []host.Cgroup{"/self/d"}}, "/", root, "/self", st, "/self/d", st, "/other", st)
	w.c.policy.Defaults.MinFreeKbytes = memcg.MinFreeAuto
	w.advance(100 * ms)
	for _, cg := range []host.Cgroup{"/self", "/self/d"} {
		if n := w.count(Freeze, cg) + w.count(Reclaim, cg); n != 0 {
			t.Errorf("%s holds the daemon: %d freezes and reclaims", cg, n)
		}
		if s, _ := w.statusOf(cg); s.Exempt != HoldsMemcgd {
			t.Errorf("%s: Exempt %q, want %q", cg, s.Exempt, HoldsMemcgd)
		}
	}
	if w.count(Freeze, "/other") == 0 {
		t.Error("/other, which does not hold the daemon, was not throttled")
	}
}

func TestStepsReuseRecentAncestorReadingsAndRefreshThemOffTheStep(t *testing.T) {
	w := newWorld(t, Config{ActiveInterval: 50 * ms}, "/", root, "/p", memcg.Stat{Limit: 1 << 30}, "/p/a", memcg.Stat{}, "/p/b", memcg.Stat{})
	w.settle()
	if n := w.count(Observe, "/p"); n != 1 {
		t.Fatalf("/p observed %d times by the listing", n)
	}
	reads := func(p host.Cgroup) int {
		n := 0
		for _, op := range w.ops {
			if slices.Contains(op.Read, p) {
				n++
			}
		}
		return n
	}
	r := reads("/p")
	w.c.Kick(w.now.Add(10*ms), "/p/a")
	w.settle()
	if reads("/p") != r {
		t.Error("a step 10 ms after /p was read read it again")
	}
	w.now = w.now.Add(100 * ms)
	w.c.Kick(w.now, "/p/b")
	w.settle()
	if reads("/p") != r+1 || w.count(Refresh, "/p") != 1 {
		t.Errorf("100 ms later: /p read %d more times (%d refreshes), want one refresh off the step", reads("/p")-r, w.count(Refresh, "/p"))
	}
	w.now = w.now.Add(2 * time.Second)
	w.c.Kick(w.now, "/p/b")
	w.settle()
	var last Op
	for _, op := range w.ops {
		if op.Kind == Observe && op.Cgroup == "/p/b" {
			last = op
		}
	}
	if !slices.Contains(last.Read, "/p") {
		t.Errorf("a step 2 s on reads %v, want /p read by the step: its reading is stale", last.Read)
	}
}

// The driver keeps the statuses Ready hands out and reads them from other
// goroutines: the Core changes a copy, never one it handed out.
func TestAStatusHandedOutIsNeverChanged(t *testing.T) {
	w := newWorld(t, Config{Policy: dirtyConfig(), Freezer: true}, "/", root, "/a", memcg.Stat{Limit: 1 << 30, Usage: 100 * mib, File: 100 * mib})
	w.settle()
	for i, dirty := range []uint64{9 * mib, 17 * mib, 4 * mib, 0} {
		w.now = w.now.Add(10 * ms)
		w.set("/a", func(s *memcg.Stat) { s.Dirty = dirty })
		w.c.Kick(w.now, "/a")
		w.settle()
		if i == 0 && len(w.handed) < 2 {
			t.Fatalf("%d statuses handed out after a change, want at least 2", len(w.handed))
		}
	}
	for i, h := range w.handed {
		if *h.p != h.then {
			t.Errorf("status %d of %s changed after it was handed out: %+v, was %+v", i, h.then.Cgroup, *h.p, h.then)
		}
	}
	if s, _ := w.statusOf("/a"); s.Stat.Dirty != 0 {
		t.Errorf("the Core's status of /a has dirty %d, want its last step's 0", s.Stat.Dirty)
	}
}

func TestTheStatusSaysWhatTheDaemonDoesNowAndSinceWhen(t *testing.T) {
	w := newWorld(t, Config{Policy: dirtyConfig(), Freezer: true}, "/", root, "/a", memcg.Stat{Limit: 1 << 30, Usage: 100 * mib, File: 100 * mib})
	state := func() (string, time.Duration) {
		s, _ := w.statusOf("/a")
		return s.State, s.Since.Sub(t0)
	}
	w.settle()
	if s, since := state(); s != "idle" || since != 0 {
		t.Errorf("under every threshold: %s since %v, want idle since the start", s, since)
	}
	w.now = w.now.Add(10 * ms)
	w.set("/a", func(s *memcg.Stat) { s.Dirty = 9 * mib })
	w.c.Kick(w.now, "/a")
	w.settle()
	if s, since := state(); s != "active" || since != 10*ms {
		t.Errorf("past dirty_background: %s since %v, want active since 10ms", s, since)
	}
	w.now = w.now.Add(10 * ms)
	w.set("/a", func(s *memcg.Stat) { s.Dirty, s.Writeback = 0, 17*mib })
	w.c.Kick(w.now, "/a")
	w.settle()
	if s, since := state(); s != "frozen" || since != 20*ms {
		t.Errorf("past the limit: %s since %v, want frozen since 20ms", s, since)
	}
	w.now = w.now.Add(5 * ms)
	w.set("/a", func(s *memcg.Stat) { s.Writeback = 4 * mib })
	w.c.Kick(w.now, "/a")
	w.settle()
	if s, since := state(); s != "throttled" || since != 25*ms {
		t.Errorf("drained below freerun: %s since %v, want throttled (thawed, the episode open) since 25ms", s, since)
	}
}

// pacedStat is a paced cgroup's observation at dirty and writeback bytes.
// The dirtied counter moves with the level: all of it is the cgroup's own
// dirtying.
func pacedStat(dirty, writeback uint64) memcg.Stat {
	return memcg.Stat{Limit: 1 << 30, Usage: 100 * mib, File: 100 * mib, Dirty: dirty, Writeback: writeback,
		Counters: memcg.Counters{HasDirtied: true, DirtiedBytes: dirty + writeback}}
}

func TestPacingEpisodes(t *testing.T) {
	w := newWorld(t, Config{Policy: dirtyConfig(), Freezer: true, Pacer: true, Counter: true}, "/", root, "/a", pacedStat(0, 6*mib))
	t0 := w.now
	w.settle()
	if w.count(Pace, "/a") != 0 {
		t.Fatal("paced below the background threshold")
	}
	w.set("/a", func(s *memcg.Stat) { *s = pacedStat(0, 14*mib) })
	paceFrom := w.now
	w.c.Kick(w.now, "/a") // the tracker's report
	w.advance(10 * ms)
	if w.count(Pace, "/a") != 1 || !w.paced["/a"].On() || w.frozen["/a"] {
		t.Fatalf("at the setpoint: %d paces, pace %+v, frozen %v; want one pace in force and no freeze", w.count(Pace, "/a"), w.paced["/a"], w.frozen["/a"])
	}
	if s, _ := w.statusOf("/a"); s.State != "paced" || s.Counters.Paces != 1 {
		t.Errorf("status %s, %d paces; want paced, one", s.State, s.Counters.Paces)
	}
	before := w.paced["/a"]
	w.set("/a", func(s *memcg.Stat) { *s = pacedStat(0, 16*mib) })
	w.advance(10 * ms)
	if got := w.paced["/a"]; w.count(SetPace, "/a") == 0 || got.Share() >= before.Share() {
		t.Errorf("at the limit: pace %+v after %+v, %d changes: want a smaller share", got, before, w.count(SetPace, "/a"))
	}
	w.set("/a", func(s *memcg.Stat) { *s = pacedStat(0, 40*mib) })
	w.advance(15 * ms)
	if !w.frozen["/a"] {
		t.Error("past the backstop level, rising by more than the least pace allows: not frozen")
	}
	// The time the pace held the tasks counts as the episode goes, read
	// at a step every heldReadInterval, and last as it ends.
	w.throttled["/a"] = 3 * ms
	w.set("/a", func(s *memcg.Stat) { *s = pacedStat(0, 4*mib) })
	w.advance(heldReadInterval + 10*ms)
	if s, _ := w.statusOf("/a"); s.Counters.PaceHeld != 3*ms {
		t.Errorf("within the episode: held %v, want the 3ms the host read", s.Counters.PaceHeld)
	}
	// So does the episode's time, up to its last step.
	if s, _ := w.statusOf("/a"); s.Counters.PacedTime > w.now.Sub(paceFrom) || s.Counters.PacedTime < w.now.Sub(paceFrom)-policy.DefaultActiveInterval {
		t.Errorf("within the episode: paced %v, %v after it began: want the time to its last step", s.Counters.PacedTime, w.now.Sub(paceFrom))
	}
	reads := 0
	for _, op := range w.ops {
		if op.Kind == Observe && op.Cgroup == "/a" && op.Held {
			reads++
		}
	}
	if n := reads; n == 0 || n > int(w.now.Sub(t0)/heldReadInterval)+1 {
		t.Errorf("%d steps read the held time in %v: want one every %v at most", n, w.now.Sub(t0), heldReadInterval)
	}
	w.throttled["/a"] = 7 * ms // what the host reads as the episode ends
	w.advance(policy.PaceLinger + 100*ms)
	if w.paced["/a"].On() || w.frozen["/a"] || w.count(Unpace, "/a") != 1 {
		t.Errorf("below freerun for PaceLinger: pace %+v, frozen %v, %d unpaces; want released, thawed", w.paced["/a"], w.frozen["/a"], w.count(Unpace, "/a"))
	}
	if s, _ := w.statusOf("/a"); s.Counters.PaceHeld != 7*ms || s.Counters.PacedTime < policy.PaceLinger || s.Counters.PacedTime > w.now.Sub(paceFrom) {
		t.Errorf("after the episode: held %v, paced %v; want the 7ms the host read, and the episode's time (over PaceLinger, under %v)",
			s.Counters.PaceHeld, s.Counters.PacedTime, w.now.Sub(paceFrom))
	}
	// A new episode, then Stop releases it.
	w.set("/a", func(s *memcg.Stat) { *s = pacedStat(0, 14*mib) })
	w.c.Kick(w.now, "/a")
	w.advance(10 * ms)
	w.c.Stop(w.now)
	w.settle()
	if w.paced["/a"].On() || !w.c.Ready().Stopped {
		t.Errorf("after Stop: pace %+v", w.paced["/a"])
	}
}

// A parent's dirty pages are its children's: while a child's dirtying
// tasks are paced, the parent is not frozen even past its backstop, which
// would stop the paced child's tasks with the rest.
func TestACgroupWithAPacedChildIsNotFrozen(t *testing.T) {
	level := func(dirty, writeback uint64) memcg.Stat {
		return memcg.Stat{Limit: 1 << 30, Usage: 200 * mib, File: 200 * mib, Dirty: dirty, Writeback: writeback,
			Counters: memcg.Counters{HasDirtied: true, DirtiedBytes: dirty + writeback}}
	}
	w := newWorld(t, Config{Policy: dirtyConfig(), Freezer: true, Pacer: true, Counter: true}, "/", root,
		"/p", level(0, 10*mib), "/p/c", level(0, 10*mib))
	w.settle()
	for _, cg := range []host.Cgroup{"/p", "/p/c"} {
		w.set(cg, func(s *memcg.Stat) { *s = level(0, 14*mib) })
		w.c.Kick(w.now, cg)
	}
	w.advance(10 * ms)
	if !w.paced["/p/c"].On() {
		t.Fatalf("the child at its setpoint: pace %+v, want paced", w.paced["/p/c"])
	}
	// The parent's pace holds none of its own tasks; its level rises
	// past its backstop with the child's.
	for _, lv := range []uint64{16, 40, 80} {
		for _, cg := range []host.Cgroup{"/p", "/p/c"} {
			w.set(cg, func(s *memcg.Stat) { *s = level(0, lv*mib) })
			w.c.Kick(w.now, cg)
		}
		w.advance(15 * ms)
	}
	if w.frozen["/p"] {
		t.Error("the parent of a paced child is frozen")
	}
	if !w.frozen["/p/c"] {
		t.Error("the child, rising past its backstop under its least pace, is not frozen: the test shows nothing")
	}
}

func TestACgroupTheHostCannotPaceIsFrozenInstead(t *testing.T) {
	w := newWorld(t, Config{Policy: dirtyConfig(), Freezer: true, Pacer: true}, "/", root,
		"/a", memcg.Stat{Limit: 1 << 30, Usage: 100 * mib, File: 100 * mib, Writeback: 14 * mib})
	w.paceErr["/a"] = errors.Join(errors.New("a v2 leaf with children"), errors.ErrUnsupported)
	w.settle()
	w.set("/a", func(s *memcg.Stat) { s.Writeback = 16 * mib })
	w.c.Kick(w.now, "/a")
	w.advance(10 * ms)
	if w.count(Pace, "/a") != 1 || !w.frozen["/a"] {
		t.Errorf("%d paces tried, frozen %v: want one, then the freezer at the limit", w.count(Pace, "/a"), w.frozen["/a"])
	}
}

// An episode that can no longer hold its cgroup's threads (their tenant
// took the pace group's name) ends without counting an error, and the
// freezer throttles the cgroup from then on.
func TestAPaceThatCanHoldNoThreadEndsAndTheFreezerTakesOver(t *testing.T) {
	w := newWorld(t, Config{Policy: dirtyConfig(), Freezer: true, Pacer: true, Counter: true}, "/", root, "/a", pacedStat(0, 14*mib))
	w.settle()
	w.c.Kick(w.now, "/a")
	w.advance(10 * ms)
	if !w.paced["/a"].On() {
		t.Fatalf("at the setpoint: pace %+v, want paced", w.paced["/a"])
	}
	w.paceErr["/a"] = errors.Join(errors.New("the tenant's memcgd.pace"), errors.ErrUnsupported)
	w.set("/a", func(s *memcg.Stat) { *s = pacedStat(0, 16*mib) })
	w.c.Kick(w.now, "/a")
	w.advance(10 * ms)
	w.set("/a", func(s *memcg.Stat) { *s = pacedStat(0, 40*mib) })
	w.c.Kick(w.now, "/a")
	w.advance(15 * ms)
	s, _ := w.statusOf("/a")
	if w.count(Unpace, "/a") != 1 || s.Counters.Errors != 0 || !w.frozen["/a"] {
		t.Errorf("%d unpaces, %d errors, frozen %v: want the episode ended, no error, then the freezer at the limit",
			w.count(Unpace, "/a"), s.Counters.Errors, w.frozen["/a"])
	}
}

func TestADryRunChangesNothingAndCountsWhatItWouldHaveDone(t *testing.T) {
	w := newWorld(t, Config{Policy: dirtyConfig(), Freezer: true, DryRun: true}, "/", root,
		"/a", memcg.Stat{Limit: 1 << 30, Usage: 100 * mib, File: 100 * mib, Dirty: 9 * mib, Writeback: 8 * mib})
	w.advance(300 * ms)
	for _, op := range w.ops {
		if op.Kind.Changes() {
			t.Errorf("a dry run handed out a %v op", op.Kind)
		}
	}
	s, _ := w.statusOf("/a")
	if !s.DryRun || s.Counters.WriteOuts == 0 || s.Counters.Pauses == 0 {
		t.Errorf("status %+v: want a dry run's, counting the write-outs and freezes it would have made", s)
	}
	if s.Counters.WriteOutBytes != 0 || s.Counters.ReclaimedBytes != 0 {
		t.Errorf("a dry run counted %d bytes written out and %d reclaimed: want none, nothing was", s.Counters.WriteOutBytes, s.Counters.ReclaimedBytes)
	}
	if w.frozen["/a"] {
		t.Error("frozen by a dry run")
	}
}

// A pace that shortens its period after the least pace leaves the period
// timer armed for the least pace's expiry: the Core writes the pace in
// force again, as the policy asks, until then.
func TestAShortenedPaceIsWrittenAgainUntilTheOldPeriodEnds(t *testing.T) {
	w := newWorld(t, Config{Policy: dirtyConfig(), Freezer: true, Pacer: true, Counter: true}, "/", root, "/a", pacedStat(0, 6*mib))
	w.settle()
	w.set("/a", func(s *memcg.Stat) { *s = pacedStat(0, 16*mib) }) // at the limit: the least pace
	w.c.Kick(w.now, "/a")
	w.advance(20 * ms)
	least := w.paced["/a"]
	if !least.Limited() || least.Period < 16*ms {
		t.Fatalf("at the limit: pace %+v, want the least", least)
	}
	w.set("/a", func(s *memcg.Stat) { *s = pacedStat(0, 12*mib+mib/2) }) // just past freerun: a short period
	w.c.Kick(w.now, "/a")
	w.advance(5 * ms)
	short := w.paced["/a"]
	if short.Period >= least.Period {
		t.Fatalf("just past freerun: pace %+v after %+v, want a shorter period", short, least)
	}
	// The pace in force is written again every period of its own; the
	// estimates may move it a little meanwhile, which is a change, not a
	// refill.
	refills := func() int {
		n := 0
		var last Op
		for _, op := range w.ops {
			if op.Kind != SetPace || op.Cgroup != "/a" {
				continue
			}
			if op.Quota == last.Quota && op.Period == last.Period && op.Period < least.Period {
				n++
			}
			last = op
		}
		return n
	}
	before := refills()
	w.advance(least.Period)
	during := refills() - before
	if min := int(least.Period/short.Period) / 4; during < min {
		t.Errorf("within the least pace's period (%v) after the change to %+v: %d refills, want at least %d", least.Period, short, during, min)
	}
	// The timer's expiry is known from the step that saw the change in
	// force, a pace's period at most after the write. After it, only a
	// pace that shortens again (the estimates move) is refilled.
	w.advance(w.paced["/a"].Period)
	from := len(w.ops)
	w.advance(least.Period)
	unexplained, last, shortened := 0, policy.Pacing{}, false
	for i, op := range w.ops {
		if op.Kind != SetPace || op.Cgroup != "/a" {
			continue
		}
		p := policy.Pacing{Quota: op.Quota, Period: op.Period}
		switch {
		case i < from:
		case p != last:
			shortened = shortened || p.Period < last.Period
		case !shortened:
			unexplained++
		}
		last = p
	}
	if unexplained > 0 {
		t.Errorf("after the least pace's period: %d refills of a pace whose period did not shorten since, want none", unexplained)
	}
}

// With the tracker and Config.PacedReportGap, a report of a cgroup whose
// pace limits its tasks is taken no sooner than the gap after its last step
// began: the kernel holds the pace between looks. The cgroup's own looks
// (its decision's NextLook) are not held back; a cgroup not paced, or any
// cgroup without a gap, is stepped at the report.
func TestAReportOfAPacedCgroupWaitsForTheGap(t *testing.T) {
	const gap = 2 * ms
	for _, tt := range []struct {
		name     string
		level    uint64        // dirty+writeback: paced past the background threshold
		after    time.Duration // from the last step to the report
		duringIt bool          // the report comes while a step is in flight
		noGap    bool          // Config.PacedReportGap 0
		at       time.Duration // from the last step to the next, 0: at the report
	}{
		{name: "paced, a report within the gap waits for its end", level: 14 * mib, after: gap / 4, at: gap},
		{name: "paced, a report past the gap steps at once", level: 14 * mib, after: gap + ms/2},
		{name: "paced, a report during a step: looked at the gap after it began", level: 14 * mib, duringIt: true, at: gap},
		{name: "not paced, below the background threshold: at once", level: 4 * mib, after: gap / 4},
		{name: "paced, no gap set: at once", level: 14 * mib, noGap: true, after: gap / 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Policy: dirtyConfig(), Tracker: true, Pacer: true, Counter: true, PacedReportGap: gap}
			if tt.noGap {
				cfg.PacedReportGap = 0
			}
			w := newWorld(t, cfg, "/", root, "/a", pacedStat(0, tt.level))
			w.settle()
			w.c.Report(w.now, "/a")
			w.advance(20 * ms) // the episode begins, the pace in force
			if paced := w.paced["/a"].Limited(); paced != (tt.level > 8*mib) {
				t.Fatalf("pace in force %+v at %d MiB; the test wants it limiting past the background threshold only", w.paced["/a"], tt.level/mib)
			}
			w.c.Kick(w.now, "/a") // a step now: the last one
			w.settle()
			last, steps := w.now, w.count(Observe, "/a")
			if tt.duringIt {
				w.hold[Observe] = true
				w.c.Kick(w.now, "/a")
				w.settle()
				last, steps = w.now, steps+1
				w.c.Report(w.now, "/a")
				w.hold[Observe] = false
				w.release(Observe)
			} else {
				w.advance(tt.after)
				w.c.Report(w.now, "/a")
				w.settle()
			}
			if tt.at == 0 {
				if n := w.count(Observe, "/a"); n != steps+1 {
					t.Errorf("%d steps at the report, want one", n-steps)
				}
				return
			}
			if n := w.count(Observe, "/a"); n != steps {
				t.Fatalf("stepped %d times before the gap's end", n-steps)
			}
			w.advance(last.Add(tt.at).Sub(w.now))
			if n := w.count(Observe, "/a"); n != steps+1 {
				t.Errorf("%d steps by %v after the last one, want one", n-steps, tt.at)
			}
		})
	}
}

// The time a managed cgroup's dirty+writeback spends over its dirty limit,
// and over 1.25 times it, is counted from the observations: each level
// stands until the next observation.
func TestTheTimeOverTheDirtyLimitIsCounted(t *testing.T) {
	w := newWorld(t, Config{Policy: dirtyConfig(), Freezer: true, Pacer: true, Counter: true}, "/", root, "/a", pacedStat(0, 6*mib))
	w.settle()
	var dirtied uint64
	for _, stretch := range []struct {
		level uint64
		lasts time.Duration
	}{
		{10 * mib, 100 * ms}, // under the 16 MiB limit
		{18 * mib, 100 * ms}, // over it, within a quarter
		{24 * mib, 60 * ms},  // over 1.25 times it
		{8 * mib, 100 * ms},
	} {
		dirtied += stretch.level
		lvl := pacedStat(0, stretch.level)
		lvl.Counters.DirtiedBytes = dirtied
		w.set("/a", func(s *memcg.Stat) { *s = lvl })
		w.c.Kick(w.now, "/a")
		w.advance(stretch.lasts)
	}
	s, _ := w.statusOf("/a")
	near := func(got, want time.Duration) bool { return got >= want-5*ms && got <= want+5*ms }
	if got := s.Counters.OverLimit; !near(got, 160*ms) {
		t.Errorf("time over the limit %v, want 160ms", got)
	}
	if got := s.Counters.OverLimitQuarter; !near(got, 60*ms) {
		t.Errorf("time over 1.25 times the limit %v, want 60ms", got)
	}
}
