package policy

import (
	"time"

	"github.com/memcgd/memcgd/memcg"
)

// MinWbDirtyPages is seed 000's MIN_WB_DIRTY_PAGES: reclaim that needs
// writeback flushes only the reclaiming cgroup's pages when it has more
// than this many dirty, and falls back to a full flush otherwise
// (fs/fs-writeback.c, wakeup_flusher_threads in the patch: "if (pdirty >
// MIN_WB_DIRTY_PAGES) return;").
const MinWbDirtyPages = 64

// MinWritebackPages is the kernel's MIN_WRITEBACK_PAGES, 4 MiB: the least
// chunk the flusher writes of an inode per pass (fs/fs-writeback.c,
// writeback_chunk_size).
const MinWritebackPages = 4096 * 1024 / memcg.PageSize

// paceWriteOutAt is the dirty bytes at which a paced cgroup's step writes
// out: a flusher's chunk, or the background threshold where that is lower.
func paceWriteOutAt(t memcg.DirtyLimits) uint64 {
	return min(MinWritebackPages*memcg.PageSize, t.Background)
}

// Controller holds what the three controllers remember of one cgroup
// between observations. The zero value is not ready; use NewController.
// A Controller is not safe for concurrent use.
type Controller struct {
	last    time.Time // previous observation
	lastD   uint64    // dirty + writeback then
	lastWB  uint64    // writeback then
	lastIn  uint64    // dirtied-bytes counter then
	lastCan uint64    // cancelled-bytes counter then
	lastOut uint64    // written-bytes counter then

	bw bandwidth
	// domainLimit is the trailing hard limit of domain_update_dirty_limit().
	domainLimit uint64
	limitStamp  time.Time

	// reclaiming is seed 001's kswapd state: woken below the low
	// watermark, it runs until free reaches the high one. passReclaimed
	// says a reclaim of the run in progress succeeded, so that its end
	// counts an overshoot.
	reclaiming, passReclaimed bool
	// reclaimDoneAt is when the latest reclaim the driver reported
	// (ReclaimDone) completed: an observation read before it does not
	// show what that reclaim freed.
	reclaimDoneAt time.Time
	// reclaimBackoff and flushBackoff space out reclaim that finds
	// nothing and full flushes that find nothing to flush (backoff.go),
	// from the outcomes the driver reports (ReclaimDone, FlushDone).
	reclaimBackoff, flushBackoff backoff
	// growth is the recent rate at which usage rose, bytes/s, averaged
	// like the write bandwidth; lastUsage is usage at the last step.
	growth    float64
	lastUsage uint64

	// throttle is the closed-loop throttle's state (freeze.go), nil
	// until the cgroup is first frozen; pacer the paced throttle's
	// (pace.go), nil until it first passes its background threshold with
	// a pacer: the thousands of idle cgroups of a host hold neither.
	throttle *throttleState
	pacer    *pacer
	// dirtyRate is the recent rate at which the cgroup dirtied pages
	// while it ran, bytes/s (timing.go); quiet says it dirtied nothing
	// since the last look. started says a first observation was taken.
	// (The booleans sit together: a Controller per cgroup, thousands.)
	dirtyRate float64
	quiet     bool
	started   bool
	// runRate is the same rate averaged both ways over runRateWindow:
	// what sizes RunFor.
	runRate float64
	// lastRun is the bytes dirtied over the last interval the rate was
	// measured on (timing.go, dirtyLook).
	lastRun uint64
}

// NewController returns a controller with the kernel's initial bandwidth.
func NewController() *Controller {
	return &Controller{bw: newBandwidth()}
}

// DirtyRate is the current estimate of the rate at which the cgroup
// dirties pages while it runs, bytes per second.
func (c *Controller) DirtyRate() uint64 { return uint64(c.dirtyRate) }

// WriteBandwidth is the current estimate of the rate at which the cgroup's
// dirty data is written out, bytes per second.
func (c *Controller) WriteBandwidth() uint64 { return uint64(c.bw.avg) }

// ReclaimDone tells the controller the outcome of the reclaim a decision
// asked for on the cgroup observed as s: failed says that the kernel found
// nothing to reclaim or the attempt failed. Repeated failures back off.
// now is when the reclaim completed, by the observations' clock.
func (c *Controller) ReclaimDone(now time.Time, s memcg.Stat, failed bool, activeInterval time.Duration) {
	if activeInterval <= 0 {
		activeInterval = DefaultActiveInterval
	}
	c.reclaimBackoff.record(now, s, failed, activeInterval)
	if now.After(c.reclaimDoneAt) {
		c.reclaimDoneAt = now
	}
	if !failed && c.reclaiming {
		c.passReclaimed = true
	}
}

// FlushDone tells the controller the outcome of the full flush a decision
// asked for on the cgroup observed as s: nothing says that the host found
// no filesystem to flush. Repeated nothings back off.
func (c *Controller) FlushDone(now time.Time, s memcg.Stat, nothing bool) {
	c.flushBackoff.record(now, s, nothing, FlushBackoffBase)
}

// Step takes one observation and decides what to do now and when to look
// again. The driver carries out every decision, and keeps its deadlines,
// before the next Step (Decision).
func (c *Controller) Step(in Input) Decision {
	var d Decision
	s := in.Stat
	dirty := s.DirtyAndWriteback()
	c.account(in, dirty)

	// Seed 004: past dirty_background, write the cgroup's files out.
	// wb_over_bg_thresh() compares dirty alone, not writeback.
	if s.Dirty > in.Dirty.Background {
		d.WriteOut = true
		d.Why |= ReasonBackground
	}

	// Seed 001: kswapd wakes when free drops below low and runs until
	// free reaches high (kswapd.go).
	free := s.Free()
	ahead := uint64(c.growth * in.horizon().Seconds())
	stale := c.kswapd(in, free, ahead, &d)

	// Seed 000: reclaim that meets dirty pages writes back the cgroup's
	// own first; with too few of its own, or writeback_first off, it
	// wakes every flusher as the stock kernel does. Reclaim meets dirty
	// pages when the clean page cache cannot cover it (the kernel wakes
	// the flushers when a whole batch taken from the LRU is dirty,
	// mm/vmscan.c shrink_inactive_list).
	clean := sat(s.File, s.Dirty+s.Writeback)
	if d.Reclaim > 0 && s.Dirty > 0 && clean < d.Reclaim {
		if in.WritebackFirst && s.Dirty > MinWbDirtyPages*memcg.PageSize {
			d.WriteOut = true
		} else {
			d.Flush = true
		}
		d.Why |= ReasonReclaimWriteback
	}
	deferred := false
	if d.Reclaim > 0 {
		d.Reclaim = min(d.Reclaim, in.reclaimStep())
		if !c.reclaimBackoff.allow(in.Now, s, in.reclaimStep()) {
			d.Reclaim, deferred = 0, true
		}
	}

	// Seed 004: past the freerun ceiling, throttle: pace the dirtiers,
	// with the freezer as the backstop, or freeze.
	if in.Pacer {
		c.pace(in, dirty, &d)
	}
	switch in.freezer() {
	case FreezerHeld:
		c.closedLoop(in, dirty, &d)
	default:
		c.endEpisode(in.Now, &d) // the driver cannot hold a freeze
		if in.Dirty.Limit != memcg.NoLimit && dirty >= c.freezeLevel(in) {
			d.Why |= ReasonThrottle // due, but nothing can stop the tasks
		}
	}

	// While the cgroup is throttled its writers outrun the device, and
	// every dirty page not yet under writeback is device time lost: the
	// kernel's flusher, once started, writes an inode's dirty pages in
	// chunks of at least MIN_WRITEBACK_PAGES (4 MiB), the pages dirtied
	// meanwhile included, and looks at the background threshold only
	// between chunks (fs/fs-writeback.c, wb_writeback,
	// writeback_chunk_size). Stopping at the threshold instead left the
	// device idle whenever a freeze came with dirty below it, as it does
	// when dirty+writeback reaches the limit mostly as writeback. So
	// within an episode the cgroup's files are written out whenever they
	// hold more than seed 000's MIN_WB_DIRTY_PAGES. While the pace is on,
	// whenever they hold a flusher's chunk (paceWriteOutAt): that shapes
	// what the device gets, a chunk at a time, where a write-out at the
	// background threshold submitted the whole threshold's worth at once
	// and a neighbour's fdatasync on the same device waited behind that
	// burst; and no less than a chunk, for a write-out of the few hundred
	// kilobytes a step finds dirty cost an in-place writer (fio) two
	// fifths of its throughput.
	if d.Episode && s.Dirty > MinWbDirtyPages*memcg.PageSize || c.paced(in) && s.Dirty >= paceWriteOutAt(in.Dirty) {
		d.WriteOut = true
		d.Why |= ReasonThrottle
	}
	if d.Flush {
		d.WriteOut = false // a flush covers the cgroup's own files
		if !c.flushBackoff.allow(in.Now, s, in.reclaimStep()) {
			d.Flush = false // nothing to flush lately: wait
		}
	}
	c.timing(in, dirty, ahead, stale, &d)
	if deferred && !d.WriteOut && !d.Flush && !d.Episode && dirty < in.Dirty.Background {
		// Reclaim is all there is to do and it is backing off: wait,
		// idle, until the backoff ends or the cgroup grows by a step
		// (which may be page cache that ends it).
		d.Active = false
		d.NextLook = max(c.reclaimBackoff.until.Sub(in.Now), in.activeInterval())
		d.Wake.UsageAbove = backoffWake(s, in.Dirty, in.reclaimStep())
	}
	return d
}

// account updates the bandwidth estimate and the growth rate. The host tells bytes written (v2 io.stat)
// or bytes dirtied (the tasks' write_bytes); from either, with the change
// of dirty+writeback, follows the other.
// Before that, it replays what the driver did on its own since the last
// decision (HoldFor and RunFor deadlines).
func (c *Controller) account(in Input, dirty uint64) {
	s := in.Stat
	var dirtiedCtr, writtenCtr, cancelledCtr uint64
	switch {
	case s.Counters.HasWritten:
		writtenCtr = s.Counters.WrittenBytes
	case s.Counters.HasDirtied:
		dirtiedCtr = s.Counters.DirtiedBytes
		if s.Counters.HasCancelled {
			cancelledCtr = s.Counters.CancelledBytes
		}
	}
	if !c.started {
		c.started = true
		c.last, c.lastD, c.lastIn, c.lastOut, c.lastWB, c.lastCan = in.Now, dirty, dirtiedCtr, writtenCtr, s.Writeback, cancelledCtr
		c.lastUsage = s.Usage
		c.domainLimit = in.Dirty.Limit
		c.limitStamp = in.Now
		return
	}
	elapsed := in.Now.Sub(c.last)
	if elapsed <= 0 {
		return
	}
	frozen := c.throttle.isFrozen() // throughout, unless mixed
	ran, mixed := c.throttle.replay(c.last, in.Now)
	if in.Freezer == FreezerHeld && in.Frozen != c.throttle.isFrozen() {
		if c.throttle == nil {
			c.throttle = new(throttleState)
		}
		c.throttle.adopt(in.Frozen, c.last, in.Now)
		ran, mixed = 0, true
	}
	if mixed && c.throttle.frozen {
		c.throttle.frozenBytes, c.throttle.measureFrom = 0, in.Now
	}
	var dirtied, written uint64
	measured := true
	switch {
	case s.Counters.HasWritten:
		written = sat(writtenCtr, c.lastOut)
		dirtied = sat(dirty+written, c.lastD)
	case s.Counters.HasDirtied:
		// What left dirty+writeback was written, but for what was
		// truncated unwritten (a deleted file), which the device never
		// saw: counted as written it would have the pace allow the
		// dirtiers a rate the device cannot take.
		dirtied = sat(dirtiedCtr, c.lastIn)
		written = sat(c.lastD+dirtied, dirty+sat(cancelledCtr, c.lastCan))
	case frozen && !mixed:
		// Frozen, nothing dirties: the fall of dirty+writeback is
		// what the device wrote, a measurement.
		written = sat(c.lastD, dirty)
	default:
		// Nothing counts dirtying: the growth of dirty+writeback plus
		// what the device cleaned meanwhile at the estimated rate; an
		// assumption, not a measurement, so nothing is learnt from it.
		dirtied = sat(dirty+uint64(c.bw.avg*elapsed.Seconds()), c.lastD)
		measured = false
	}
	switch {
	case mixed && measured && dirty > 0 && c.lastD > 0:
		// Part run, part frozen by the driver's deadlines: the counters
		// still tell what the device wrote, and with dirty pages at
		// both ends it was likely busy throughout. With a slow driver
		// every freeze is the driver's and this is the only sample.
		c.bw.drained(written, elapsed)
	case mixed:
		// No counters: no clean sample of the device.
	case frozen:
		// The drain is learnt whole when the cgroup is thawed.
		c.throttle.frozenBytes += written
	case measured && s.Writeback > 0 && c.lastWB > 0:
		// Writeback in flight at both ends: the device had work all
		// along, so this is its rate, whatever paced the dirtier.
		c.bw.busy(written, elapsed)
	case measured && (written > 0 || s.Writeback > 0):
		// Like wb_bandwidth_estimate_start(), learn only while
		// something is being written, so idle time (dirty pages below
		// the background threshold, which nothing writes) does not
		// deflate the estimate.
		c.bw.update(written, elapsed)
	}
	if !measured {
		dirtied = 0 // an assumed rate says nothing of charging
	}
	c.updateGrowth(s.Usage, dirtied, elapsed)
	if ran >= MinLook && (measured || !mixed) {
		// A shorter run (a driver's thaw just before this step) says
		// nothing of the rate, nor that the cgroup went quiet.
		// Without counters, the rise of dirty+writeback is the least
		// the cgroup can have dirtied.
		rated := dirtied
		if !measured {
			rated = sat(dirty, c.lastD)
		}
		c.updateDirtyRate(rated, ran)
	}
	c.last, c.lastD, c.lastIn, c.lastOut, c.lastWB, c.lastCan = in.Now, dirty, dirtiedCtr, writtenCtr, s.Writeback, cancelledCtr
	c.updateDomainLimit(in)
}

// growthWindow is the averaging window of the growth rate: short, since it
// predicts the next steps only (the userspace kswapd's wake-up and looks,
// kswapd.go), and long enough to average a writer's bursts (a 1 MiB write
// charged at once, then a pause) and the charge batches usage moves by
// (MEMCG_CHARGE_BATCH pages per CPU, mm/memcontrol.c) into a rate.
const growthWindow = 100 * time.Millisecond

// updateGrowth folds the charge rate since the last step into the growth
// rate, over growthWindow. Usage alone hides it: at the limit, reclaim
// (the kernel's or ours) frees as fast as the tasks charge and usage stays
// flat. Every dirtied byte of a writer is a newly charged page, so the
// rate is the larger of the rise of usage and the bytes dirtied.
func (c *Controller) updateGrowth(usage, dirtied uint64, elapsed time.Duration) {
	rate := float64(max(sat(usage, c.lastUsage), dirtied)) / elapsed.Seconds()
	w := min(float64(elapsed)/float64(growthWindow), 1)
	c.growth = rate*w + c.growth*(1-w)
	c.lastUsage = usage
}

// updateDomainLimit is domain_update_dirty_limit(): the hard limit rises
// to the threshold at once and falls towards max(thresh, dirty) by 1/32
// of the gap per BandwidthInterval, so a shrinking limit does not stop
// writers dead.
func (c *Controller) updateDomainLimit(in Input) {
	thresh := in.Dirty.Limit
	if c.domainLimit < thresh {
		c.domainLimit = thresh
		c.limitStamp = in.Now
		return
	}
	for ; in.Now.Sub(c.limitStamp) >= BandwidthInterval; c.limitStamp = c.limitStamp.Add(BandwidthInterval) {
		floor := max(thresh, in.Stat.DirtyAndWriteback())
		if c.domainLimit <= floor {
			c.limitStamp = in.Now
			break
		}
		c.domainLimit -= (c.domainLimit - floor) >> 5
	}
}

// sat is a - b, or 0 when b > a: a counter's increase (0 after a reset) or
// a difference that cannot go negative.
func sat(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}
