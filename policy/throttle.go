package policy

import (
	"time"

	"github.com/memcgd/memcgd/memcg"
)

// The dirty throttle's arithmetic follows balance_dirty_pages() in
// mm/page-writeback.c, with the cgroup as the only dirty domain: below the
// freerun ceiling nothing happens; above it a dirtier may dirty at
// task_ratelimit = dirty_ratelimit * pos_ratio, where pos_ratio falls
// along a cubic from 2.0 at freerun through 1.0 at the setpoint to 0 at
// the limit.

// Constants of mm/page-writeback.c, under their kernel names.
const (
	// MaxPause bounds one pause: MAX_PAUSE = max(HZ/5, 1), 200 ms.
	MaxPause = 200 * time.Millisecond
	// RatelimitCalcShift is the fixed point of pos_ratio: 1.0 is 1 << 10
	// (RATELIMIT_CALC_SHIFT).
	RatelimitCalcShift = 10
	// InitBW is the initial write bandwidth, 100 MB/s (INIT_BW in
	// mm/backing-dev.c, 100 << (20 - PAGE_SHIFT) pages/s).
	InitBW = 100 << 20
	// BandwidthInterval is the least time between bandwidth and dirty
	// limit updates (BANDWIDTH_INTERVAL, 200 ms).
	BandwidthInterval = 200 * time.Millisecond
)

// DirtySetpoint returns the dirty level the throttle steers to and the hard
// limit it never lets dirty pass: setpoint = (freerun + limit) / 2, limit
// = hard_dirty_limit() = max(thresh, the domain's trailing dirty_limit).
func DirtySetpoint(d memcg.DirtyLimits, domainLimit uint64) (setpoint, limit uint64) {
	limit = max(d.Limit, domainLimit)
	freerun := d.Freerun()
	return freerun/2 + limit/2 + (freerun & limit & 1), limit
}

// PosRatio is pos_ratio_polynom() in mm/page-writeback.c, in units of
// 1/1024: 1 + ((setpoint - dirty) / (limit - setpoint))^3, clamped to
// [0, 2], and 0 once dirty reaches the limit (wb_position_ratio()).
// Arguments are in pages, as the kernel's are.
func PosRatio(setpoint, dirty, limit int64) int64 {
	if dirty >= limit {
		return 0
	}
	x := ((setpoint - dirty) << RatelimitCalcShift) / ((limit - setpoint) | 1)
	pos := x
	pos = pos * x >> RatelimitCalcShift
	pos = pos * x >> RatelimitCalcShift
	pos += 1 << RatelimitCalcShift
	return min(max(pos, 0), 2<<RatelimitCalcShift)
}

// TaskRatelimit is dirty_ratelimit * pos_ratio >> RATELIMIT_CALC_SHIFT,
// in bytes per second.
func TaskRatelimit(dirtyRatelimit uint64, pos int64) uint64 {
	return dirtyRatelimit * uint64(pos) >> RatelimitCalcShift
}
