package kernel

import (
	"math/bits"

	"github.com/memcgd/memcgd/memcg"
)

// Dirty throttling (mm/page-writeback.c): the global dirty domain and, on
// cgroup v2 or with seed 004, a memcg domain; balance_dirty_pages() with
// the freerun ceiling, the position ratio (pos_ratio_polynom, the global
// cubic, times the per-wb line), pauses of at most MAX_PAUSE, and the
// bandwidth and dirty ratelimit estimators updated every
// BANDWIDTH_INTERVAL. The arithmetic is the model's own port of the
// kernel's, function by function; memcgd's policy has its own, and
// crosscheck_test.go compares the two.

// Constants of mm/page-writeback.c, in pages and jiffies.
const (
	// DirtyPollThresh is DIRTY_POLL_THRESH, 128 KiB in pages.
	DirtyPollThresh = 128 >> (PageShift - 10)
	// InitBW is INIT_BW (mm/backing-dev.c), 100 MB/s in pages per second.
	InitBW = 100 << (20 - PageShift)
	// RatelimitCalcShift is RATELIMIT_CALC_SHIFT: the fixed point of
	// pos_ratio, 1.0 = 1 << RatelimitCalcShift.
	RatelimitCalcShift = 10
	// vmCompletionsPeriod is VM_COMPLETIONS_PERIOD_LEN, 3 s.
	vmCompletionsPeriod = 3 * Second
)

// maxPause is MAX_PAUSE, max(HZ/5, 1) jiffies (200 ms).
func (k *Kernel) maxPause() int64 { return max(k.hz()/5, 1) }

// bandwidthInterval is BANDWIDTH_INTERVAL, max(HZ/5, 1) jiffies (200 ms),
// as simulated time.
func (k *Kernel) bandwidthInterval() Time { return k.fromJiffies(max(k.hz()/5, 1)) }

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

// domainDirtyLimits is domain_dirty_limits(): dtc.thresh and dtc.bg_thresh
// over dtc.avail from vm, the vm.dirty_* sysctls (or, for seed 004, a
// cgroup's own memory.dirty_* files, which it reads the same way). Bytes win
// over ratios; a ratio is held per PAGE_SIZE for precision. gdtc is nil
// for the global domain. For a memcg domain (gdtc the global one) the byte
// settings cannot apply directly: they become ratios of the global avail.
// A background threshold at or above the threshold becomes half of it.
// The lift for real-time tasks is not modelled (the model has none).
func domainDirtyLimits(dtc, gdtc *dirtyThrottleControl, vm *memcg.Knobs) {
	avail := uint64(max(dtc.avail, 0))
	bytes, bgBytes := vm.DirtyBytes, vm.DirtyBackgroundBytes
	ratio := vm.DirtyRatio * PageSize / 100
	bgRatio := vm.DirtyBackgroundRatio * PageSize / 100
	if gdtc != nil {
		globalAvail := uint64(max(gdtc.avail, 1))
		if bytes != 0 {
			ratio = min(divRoundUp(bytes, globalAvail), PageSize)
		}
		if bgBytes != 0 {
			bgRatio = min(divRoundUp(bgBytes, globalAvail), PageSize)
		}
		bytes, bgBytes = 0, 0
	}
	var thresh, bgThresh uint64
	if bytes != 0 {
		thresh = divRoundUp(bytes, PageSize)
	} else {
		thresh = ratio * avail / PageSize
	}
	if bgBytes != 0 {
		bgThresh = divRoundUp(bgBytes, PageSize)
	} else {
		bgThresh = bgRatio * avail / PageSize
	}
	if bgThresh >= thresh {
		bgThresh = thresh / 2
	}
	dtc.thresh, dtc.bgThresh = int64(thresh), int64(bgThresh)
}

// divRoundUp is DIV_ROUND_UP(n, d), without the kernel macro's wrap-around
// for n within d of 2^64.
func divRoundUp(n, d uint64) uint64 {
	q := n / d
	if n%d != 0 {
		q++
	}
	return q
}

// globalDirtyLimits is global_dirty_limits(): nr_dirty_background_threshold
// and nr_dirty_threshold.
func (k *Kernel) globalDirtyLimits() (bg, thresh int64) {
	g := dirtyThrottleControl{avail: k.globalDirtyable()}
	domainDirtyLimits(&g, nil, &k.cfg.VMDirty)
	return g.bgThresh, g.thresh
}

// hardDirtyLimit is hard_dirty_limit(): the domain's trailing dirty_limit,
// never below the current threshold.
func hardDirtyLimit(domLimit, thresh int64) int64 { return max(thresh, domLimit) }

// mdtcCalcAvail is mdtc_calc_avail(): what a memcg domain may still grow
// into is capped by the machine's clean memory outside the domain.
func mdtcCalcAvail(mdtc, gdtc *dirtyThrottleControl, filepages, headroom int64) {
	clean := filepages - min(filepages, mdtc.dirty)
	globalClean := gdtc.avail - min(gdtc.avail, gdtc.dirty)
	otherClean := globalClean - min(globalClean, clean)
	mdtc.avail = filepages + min(headroom, otherClean)
}

func (k *Kernel) globalDtc() dirtyThrottleControl {
	root := &k.memcgs[0]
	g := dirtyThrottleControl{avail: k.globalDirtyable()}
	g.dirty = root.hstat[msFileDirty] + root.hstat[msFileWriteback]
	domainDirtyLimits(&g, nil, &k.cfg.VMDirty)
	g.limit = hardDirtyLimit(k.globalDomain.dirtyLimit, g.thresh)
	return g
}

// memcgDtc is the memcg domain of wb's cgroup m (mem_cgroup_wb_stats +
// mdtc_calc_avail + domain_dirty_limits). On stock v2 the vm.dirty_*
// settings apply to the memcg's avail (bytes as ratios of the global
// avail); with seed 004 the cgroup's own knobs do, never above its
// ancestors'.
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
	mdtcCalcAvail(&d, g, filepages, headroom)
	if seed004 {
		d.bgThresh, d.thresh = k.opts.Seed004.limits(k, m)
	} else {
		domainDirtyLimits(&d, g, &k.cfg.VMDirty)
	}
	c := &k.memcgs[m]
	if c.domainLimit < d.thresh {
		c.domainLimit, c.limitStamp = d.thresh, k.now
	}
	d.limit = hardDirtyLimit(c.domainLimit, d.thresh)
	return d, true
}

// dirtyFreerunCeiling is dirty_freerun_ceiling(): below it, between the
// background and the dirty threshold, dirtiers run unthrottled.
func dirtyFreerunCeiling(thresh, bgThresh int64) int64 { return (thresh + bgThresh) / 2 }

// posRatioPolynom is pos_ratio_polynom(), in units of 1 <<
// RatelimitCalcShift:
//
//	f(dirty) = 1.0 + ((setpoint - dirty) / (limit - setpoint))^3
//
// clamped to [0, 2.0]: 2.0 at freerun, 1.0 at the setpoint, 0 at the limit,
// falling faster the further dirty is from the setpoint. The caller
// handles dirty at or past the limit (wb_position_ratio returns 0 there).
func posRatioPolynom(setpoint, dirty, limit int64) int64 {
	x := ((setpoint - dirty) << RatelimitCalcShift) / ((limit - setpoint) | 1)
	pos := x
	pos = pos * x >> RatelimitCalcShift
	pos = pos * x >> RatelimitCalcShift
	pos += 1 << RatelimitCalcShift
	return min(max(pos, 0), 2<<RatelimitCalcShift)
}

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
// cubic (posRatioPolynom) times the wb's linear line, with the reserve
// area that keeps the device busy when the wb has few dirty pages.
func (k *Kernel) wbPositionRatio(w int32, d *dirtyThrottleControl) {
	d.posRatio = 0
	fr := dirtyFreerunCeiling(d.thresh, d.bgThresh)
	if d.dirty >= d.limit {
		return
	}
	setpoint := (fr + d.limit) / 2
	pos := posRatioPolynom(setpoint, d.dirty, d.limit)
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
	return min(t, k.maxPause())
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
	if g.dirty <= dirtyFreerunCeiling(g.thresh, g.bgThresh) && (!hasM || mdtc.dirty <= dirtyFreerunCeiling(mdtc.thresh, mdtc.bgThresh)) {
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
	if now-k.wbs[w].bw.bwTimeStamp >= k.bandwidthInterval() {
		k.wbUpdateBandwidth(w, &g, &mdtc, hasM, now)
	}
	dirtyRatelimit := k.wbs[w].bw.dirtyRatelimit
	taskRatelimit := dirtyRatelimit * s.posRatio >> RatelimitCalcShift
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
	k.sleep(t, t.clock+d, StopDirtyPause)
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
	if now-dom.stamp < k.bandwidthInterval() && dom.dirtyLimit >= d.thresh {
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
	fr := dirtyFreerunCeiling(d.thresh, d.bgThresh)
	setpoint := (fr + d.limit) / 2
	writeBW := b.avgWriteBandwidth
	dirtyRatelimit := b.dirtyRatelimit
	dirtyRate := (wb.dirtied - b.dirtiedStamp) * k.hz() / elapsed
	taskRatelimit := dirtyRatelimit*d.posRatio>>RatelimitCalcShift + 1
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
