package kernel

import (
	"math/bits"

	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/policy"
)

// Dirty throttling (mm/page-writeback.c): the global dirty domain and, on
// cgroup v2 or with seed 004, a memcg domain; balance_dirty_pages() with
// the freerun ceiling, the position ratio (policy.PosRatio, the same cubic)
// and the per-wb line, pauses of at most MAX_PAUSE, and the bandwidth and
// dirty ratelimit estimators updated every BANDWIDTH_INTERVAL.

// Constants of mm/page-writeback.c, in pages and jiffies.
const (
	// DirtyPollThresh is DIRTY_POLL_THRESH, 128 KiB in pages.
	DirtyPollThresh = 128 >> (PageShift - 10)
	// InitBW is INIT_BW, 100 MB/s in pages per second.
	InitBW = 100 << (20 - PageShift)
	// vmCompletionsPeriod is VM_COMPLETIONS_PERIOD_LEN, 3 s.
	vmCompletionsPeriod = 3 * Second
)

// dirtyThrottleControl is struct dirty_throttle_control, in pages.
type dirtyThrottleControl struct {
	avail, dirty, thresh, bgThresh int64
	wbDirty, wbThresh, wbBgThresh  int64
	posRatio                       int64
	limit                          int64 // the domain's trailing dirty_limit
}

// wbDomain is struct wb_domain: the trailing hard limit.
type wbDomain struct {
	dirtyLimit int64
	stamp      Time
}

// wbBandwidth is the estimator state of a bdi_writeback (pages/s).
type wbBandwidth struct {
	writeBandwidth, avgWriteBandwidth      int64
	dirtyRatelimit, balancedDirtyRatelimit int64
	bwTimeStamp                            Time
	dirtiedStamp, writtenStamp             int64
}

func newWBBandwidth(now Time) wbBandwidth {
	return wbBandwidth{InitBW, InitBW, InitBW, InitBW, now, 0, 0}
}

func (k *Kernel) hz() int64 { return k.cfg.HZ }

func (k *Kernel) jiffies(t Time) int64 { return int64(t) * k.cfg.HZ / int64(Second) }

func (k *Kernel) fromJiffies(j int64) Time { return Time(j * int64(Second) / k.cfg.HZ) }

// globalDirtyable is global_dirtyable_memory().
func (k *Kernel) globalDirtyable() int64 {
	nd := &k.node
	x := nd.free()
	x -= min(x, nd.totalreservePages)
	return x + nd.filePages + 1
}

// domainLimits is domain_dirty_limits() over avail pages with the given
// knobs, reusing memcg.Knobs.DirtyLimits (the same ratio arithmetic).
func domainLimits(kn memcg.Knobs, avail int64) (bg, thresh int64) {
	d := kn.DirtyLimits(uint64(avail) * PageSize)
	if d.Limit == memcg.NoLimit {
		return noLimit, noLimit
	}
	return int64(d.Background / PageSize), int64(d.Limit / PageSize)
}

// globalDirtyLimits is global_dirty_limits(): nr_dirty_background_threshold
// and nr_dirty_threshold.
func (k *Kernel) globalDirtyLimits() (bg, thresh int64) {
	return domainLimits(k.cfg.VMDirty, k.globalDirtyable())
}

func (k *Kernel) globalDtc() dirtyThrottleControl {
	root := &k.memcgs[0]
	g := dirtyThrottleControl{avail: k.globalDirtyable()}
	g.dirty = root.hstat[msFileDirty] + root.hstat[msFileWriteback]
	g.bgThresh, g.thresh = domainLimits(k.cfg.VMDirty, g.avail)
	g.limit = max(g.thresh, k.globalDomain.dirtyLimit)
	return g
}

// memcgDtc is the memcg domain of wb's cgroup m (mem_cgroup_wb_stats +
// mdtc_calc_avail + domain_dirty_limits). On stock v2 the vm.dirty_*
// ratios apply to the memcg's avail; with seed 004 the cgroup's own knobs
// do, never above its ancestors'.
func (k *Kernel) memcgDtc(m int32, g *dirtyThrottleControl, dirtyOnly bool) (dirtyThrottleControl, bool) {
	seed004 := k.opts.Seed004 != nil
	if m == 0 || (k.cfg.CgroupVersion == 1 && !seed004) {
		return dirtyThrottleControl{}, false
	}
	filepages, headroom, dirty, writeback := k.wbStats(m)
	d := dirtyThrottleControl{dirty: dirty}
	if !dirtyOnly {
		d.dirty += writeback
	}
	clean := filepages - min(filepages, dirty)
	globalClean := g.avail - min(g.avail, g.dirty)
	otherClean := globalClean - min(globalClean, clean)
	d.avail = filepages + min(headroom, otherClean)
	if seed004 {
		d.bgThresh, d.thresh = k.opts.Seed004.limits(k, m)
	} else {
		d.bgThresh, d.thresh = domainLimits(k.cfg.VMDirty, d.avail)
	}
	c := &k.memcgs[m]
	if c.domainLimit < d.thresh {
		c.domainLimit, c.limitStamp = d.thresh, k.now
	}
	d.limit = max(d.thresh, c.domainLimit)
	return d, true
}

// freerun is dirty_freerun_ceiling().
func freerun(thresh, bg int64) int64 { return (thresh + bg) / 2 }

// dirtyPollInterval is dirty_poll_interval().
func dirtyPollInterval(dirty, thresh int64) int64 {
	if thresh > dirty {
		return 1 << (ilog2(thresh-dirty) >> 1)
	}
	return 1
}

func ilog2(x int64) int {
	if x <= 0 {
		return 0
	}
	return 63 - bits.LeadingZeros64(uint64(x))
}

func roundupPow2(x int64) int64 {
	if x <= 1 {
		return 1
	}
	return 1 << (64 - bits.LeadingZeros64(uint64(x-1)))
}

// wbFraction is the wb's share of its domain's recent completions
// (fprop_fraction_percpu), as num/den.
func (k *Kernel) wbFraction(w int32) (num, den int64) {
	k.decayCompletions(w)
	k.decayDomain()
	return k.wbs[w].completions, max(k.domainCompletions, 1)
}

func (k *Kernel) decayCompletions(w int32) {
	p := int64(k.now / vmCompletionsPeriod)
	wb := &k.wbs[w]
	if d := p - wb.complPeriod; d > 0 {
		wb.completions >>= min(d, 62)
		wb.complPeriod = p
	}
}

func (k *Kernel) decayDomain() {
	p := int64(k.now / vmCompletionsPeriod)
	if d := p - k.domainComplPeriod; d > 0 {
		k.domainCompletions >>= min(d, 62)
		k.domainComplPeriod = p
	}
}

// wbWriteoutInc is __wb_writeout_add()'s fprop events.
func (k *Kernel) wbWriteoutInc(w int32, n int64) {
	k.decayCompletions(w)
	k.decayDomain()
	k.wbs[w].completions += n
	k.domainCompletions += n
}

// wbDirtyLimits is wb_dirty_limits(): the wb's share of the domain's
// thresholds. In a memcg domain the wb is the memcg's only one per disk.
func (k *Kernel) wbDirtyLimits(w int32, d *dirtyThrottleControl, memcgDomain bool) {
	wb := &k.wbs[w]
	if memcgDomain {
		d.wbThresh = d.thresh
	} else {
		num, den := k.wbFraction(w)
		d.wbThresh = d.thresh * num / den
	}
	d.wbBgThresh = 0
	if d.thresh > 0 {
		d.wbBgThresh = d.wbThresh * d.bgThresh / d.thresh
	}
	d.wbDirty = wb.reclaimable + wb.writeback
	if memcgDomain {
		d.wbDirty = d.dirty
	}
}

// wbPositionRatio is wb_position_ratio() (non-strictlimit): the global
// cubic (policy.PosRatio) times the wb's linear line, with the reserve
// area that keeps the device busy when the wb has few dirty pages.
func (k *Kernel) wbPositionRatio(w int32, d *dirtyThrottleControl) {
	d.posRatio = 0
	fr := freerun(d.thresh, d.bgThresh)
	if d.dirty >= d.limit {
		return
	}
	setpoint := (fr + d.limit) / 2
	pos := policy.PosRatio(setpoint, d.dirty, d.limit)
	writeBW := k.wbs[w].bw.avgWriteBandwidth
	wbThresh := min(d.wbThresh, d.thresh)
	wbThresh = max(wbThresh, (d.limit-d.dirty)/8)
	x := (wbThresh << 16) / (d.thresh | 1)
	wbSetpoint := setpoint * x >> 16
	span := (d.thresh - wbThresh + 8*writeBW) * x >> 16
	xIntercept := wbSetpoint + span
	if d.wbDirty < xIntercept-span/4 {
		pos = pos * (xIntercept - d.wbDirty) / ((xIntercept - wbSetpoint) | 1)
	} else {
		pos /= 4
	}
	xIntercept = wbThresh / 2
	if d.wbDirty < xIntercept {
		if d.wbDirty > xIntercept/8 {
			pos = pos * xIntercept / d.wbDirty
		} else {
			pos *= 8
		}
	}
	d.posRatio = pos
}

// wbMaxPause is wb_max_pause(), in jiffies.
func (k *Kernel) wbMaxPause(w int32, wbDirty int64) int64 {
	hz := k.hz()
	bw := k.wbs[w].bw.avgWriteBandwidth
	t := wbDirty / (1 + bw/roundupPow2(1+hz/8))
	t++
	return min(t, max(hz/5, 1))
}

// wbMinPause is wb_min_pause(): the shortest pause worth sleeping, and the
// pages to dirty before the next check.
func (k *Kernel) wbMinPause(w int32, maxPause, taskRatelimit, dirtyRatelimit int64) (minPause, pages int64) {
	hz := k.hz()
	hi := int64(ilog2(k.wbs[w].bw.avgWriteBandwidth))
	lo := int64(ilog2(k.wbs[w].bw.dirtyRatelimit))
	t := max(1, hz/100)
	if hi > lo {
		t += (hi - lo) * (10 * hz) / 1024
	}
	t = min(t, 1+maxPause/2)
	pages = dirtyRatelimit * t / roundupPow2(hz)
	if pages < DirtyPollThresh {
		t = maxPause
		pages = dirtyRatelimit * t / roundupPow2(hz)
		if pages > DirtyPollThresh {
			pages = DirtyPollThresh
			t = hz * DirtyPollThresh / max(dirtyRatelimit, 1)
		}
	}
	pause := hz * pages / (taskRatelimit + 1)
	if pause > maxPause {
		t = maxPause
		pages = taskRatelimit * t / roundupPow2(hz)
	}
	if pages >= DirtyPollThresh {
		return 1 + t/2, pages
	}
	return t, pages
}

// balanceDirtyPages is balance_dirty_pages() for task t dirtying through
// wb w. It returns false if t was put to sleep.
func (k *Kernel) balanceDirtyPages(t *Task, w int32) bool {
	if k.opts.Throttle2633 != nil {
		return k.balanceDirtyPages2633(t, w)
	}
	now := t.clock
	g := k.globalDtc()
	mdtc, hasM := k.memcgDtc(k.wbs[w].memcg, &g, false)
	if k.opts.Seed004 != nil && !hasM {
		mdtc, hasM = k.memcgDtc(t.memcg, &g, false)
	}
	nrReclaimable := k.memcgs[0].hstat[msFileDirty]
	if nrReclaimable > g.bgThresh && !k.writebackInProgress(w) {
		k.wbStartBackgroundWriteback(w)
	}
	if k.opts.Seed004 != nil {
		k.opts.Seed004.background(k, t.memcg)
	}
	if g.dirty <= freerun(g.thresh, g.bgThresh) && (!hasM || mdtc.dirty <= freerun(mdtc.thresh, mdtc.bgThresh)) {
		t.dirtyPausedWhen = now
		t.nrDirtied = 0
		t.nrDirtiedPause = dirtyPollInterval(g.dirty, g.thresh)
		if hasM {
			t.nrDirtiedPause = min(t.nrDirtiedPause, dirtyPollInterval(mdtc.dirty, mdtc.thresh))
		}
		k.wbs[w].dirtyExceeded = false
		return true
	}
	if !k.writebackInProgress(w) {
		k.wbStartBackgroundWriteback(w)
	}
	k.wbDirtyLimits(w, &g, false)
	exceeded := g.wbDirty > g.wbThresh && g.dirty > g.thresh
	k.wbPositionRatio(w, &g)
	s := &g
	if hasM {
		k.wbDirtyLimits(w, &mdtc, true)
		exceeded = exceeded || (mdtc.wbDirty > mdtc.wbThresh && mdtc.dirty > mdtc.thresh)
		k.wbPositionRatio(w, &mdtc)
		if mdtc.posRatio < g.posRatio {
			s = &mdtc
		}
	}
	k.wbs[w].dirtyExceeded = exceeded
	if now-k.wbs[w].bw.bwTimeStamp >= Time(policy.BandwidthInterval) {
		k.wbUpdateBandwidth(w, &g, &mdtc, hasM, now)
	}
	dirtyRatelimit := k.wbs[w].bw.dirtyRatelimit
	taskRatelimit := dirtyRatelimit * s.posRatio >> policy.RatelimitCalcShift
	maxPause := k.wbMaxPause(w, s.wbDirty)
	minPause, nrPause := k.wbMinPause(w, maxPause, taskRatelimit, dirtyRatelimit)
	var period, pause int64
	pagesDirtied := t.nrDirtied
	if taskRatelimit == 0 {
		period, pause = maxPause, maxPause
	} else {
		period = k.hz() * pagesDirtied / taskRatelimit
		pause = period
		if t.dirtyPausedWhen != 0 {
			pause -= k.jiffies(now - t.dirtyPausedWhen)
		}
		if pause < minPause {
			switch {
			case pause < -k.hz():
				t.dirtyPausedWhen, t.nrDirtied = now, 0
			case period > 0:
				t.dirtyPausedWhen += k.fromJiffies(period)
				t.nrDirtied = 0
			case t.nrDirtiedPause <= pagesDirtied:
				t.nrDirtiedPause += pagesDirtied
			}
			return true
		}
		if pause > maxPause {
			now += k.fromJiffies(min(pause-maxPause, maxPause))
			pause = maxPause
		}
	}
	d := k.fromJiffies(pause)
	t.dirtyPausedWhen = now + d
	t.nrDirtied = 0
	t.nrDirtiedPause = nrPause
	t.Pauses++
	k.countEvent(t.memcg, meThrottled, 1)
	t.bdpAgain = taskRatelimit == 0
	k.sleep(t, t.clock+d, &t.Paused)
	return false
}

// wbUpdateBandwidth is __wb_update_bandwidth() with update_ratelimit.
func (k *Kernel) wbUpdateBandwidth(w int32, g, m *dirtyThrottleControl, hasM bool, now Time) {
	wb := &k.wbs[w]
	b := &wb.bw
	elapsed := k.jiffies(now - b.bwTimeStamp)
	if elapsed <= 0 {
		return
	}
	k.updateDomainLimit(&k.globalDomain, g, now)
	if hasM {
		c := &k.memcgs[wb.memcg]
		dom := wbDomain{dirtyLimit: c.domainLimit, stamp: c.limitStamp}
		k.updateDomainLimit(&dom, m, now)
		c.domainLimit, c.limitStamp = dom.dirtyLimit, dom.stamp
	}
	k.wbUpdateDirtyRatelimit(w, g, elapsed)
	if hasM {
		k.wbUpdateDirtyRatelimit(w, m, elapsed)
	}
	k.wbUpdateWriteBandwidth(w, elapsed)
	b.dirtiedStamp = wb.dirtied
	b.writtenStamp = wb.written
	b.bwTimeStamp = now
}

// updateDomainLimit is update_dirty_limit(): the hard limit jumps up to
// thresh and trails down towards max(thresh, dirty) by 1/32 per update.
func (k *Kernel) updateDomainLimit(dom *wbDomain, d *dirtyThrottleControl, now Time) {
	if now-dom.stamp < Time(policy.BandwidthInterval) && dom.dirtyLimit >= d.thresh {
		return
	}
	dom.stamp = now
	limit := dom.dirtyLimit
	if limit < d.thresh {
		dom.dirtyLimit = d.thresh
		return
	}
	th := max(d.thresh, d.dirty)
	if limit > th {
		dom.dirtyLimit = limit - (limit-th)>>5
	}
}

// wbUpdateWriteBandwidth is wb_update_write_bandwidth(): a running average
// over roundup_pow_of_two(3 HZ) and a second stage that follows only
// sustained moves.
func (k *Kernel) wbUpdateWriteBandwidth(w int32, elapsed int64) {
	wb := &k.wbs[w]
	b := &wb.bw
	period := roundupPow2(3 * k.hz())
	avg := b.avgWriteBandwidth
	old := b.writeBandwidth
	bw := (wb.written - min(wb.written, b.writtenStamp)) * k.hz()
	if elapsed > period {
		bw /= elapsed
		avg = bw
	} else {
		bw += old * (period - elapsed)
		bw >>= ilog2(period)
		if avg > old && old >= bw {
			avg -= (avg - old) >> 3
		}
		if avg < old && old <= bw {
			avg += (old - avg) >> 3
		}
	}
	b.writeBandwidth = bw
	b.avgWriteBandwidth = max(avg, 1)
}

// wbUpdateDirtyRatelimit is wb_update_dirty_ratelimit(): steer
// dirty_ratelimit towards the balanced rate write_bw * task_ratelimit /
// dirty_rate, in damped steps, only in the direction that brings dirty
// back to the setpoint.
func (k *Kernel) wbUpdateDirtyRatelimit(w int32, d *dirtyThrottleControl, elapsed int64) {
	wb := &k.wbs[w]
	b := &wb.bw
	fr := freerun(d.thresh, d.bgThresh)
	setpoint := (fr + d.limit) / 2
	writeBW := b.avgWriteBandwidth
	dirtyRatelimit := b.dirtyRatelimit
	dirtyRate := (wb.dirtied - b.dirtiedStamp) * k.hz() / elapsed
	taskRatelimit := dirtyRatelimit*d.posRatio>>policy.RatelimitCalcShift + 1
	balanced := taskRatelimit * writeBW / (dirtyRate | 1)
	balanced = min(balanced, writeBW)
	var step int64
	if d.dirty < setpoint {
		x := min(b.balancedDirtyRatelimit, balanced, taskRatelimit)
		if dirtyRatelimit < x {
			step = x - dirtyRatelimit
		}
	} else {
		x := max(b.balancedDirtyRatelimit, balanced, taskRatelimit)
		if dirtyRatelimit > x {
			step = dirtyRatelimit - x
		}
	}
	shift := dirtyRatelimit / (2*step + 1)
	if shift < 64 {
		step = ((step >> shift) + 7) / 8
	} else {
		step = 0
	}
	if dirtyRatelimit < balanced {
		dirtyRatelimit += step
	} else {
		dirtyRatelimit -= step
	}
	b.dirtyRatelimit = max(dirtyRatelimit, 1)
	b.balancedDirtyRatelimit = balanced
}

// wbOverBgThresh is wb_over_bg_thresh(): dirty pages only, not writeback.
func (k *Kernel) wbOverBgThresh(w int32) bool {
	wb := &k.wbs[w]
	g := k.globalDtc()
	g.dirty = k.memcgs[0].hstat[msFileDirty]
	if g.dirty > g.bgThresh {
		return true
	}
	num, den := k.wbFraction(w)
	if wb.reclaimable > g.bgThresh*num/den {
		return true
	}
	if k.cfg.CgroupVersion == 2 && wb.memcg != 0 && k.opts.Seed004 == nil {
		m, ok := k.memcgDtc(wb.memcg, &g, true)
		if ok && (m.dirty > m.bgThresh || wb.reclaimable > m.bgThresh) {
			return true
		}
	}
	return false
}
