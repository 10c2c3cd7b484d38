package kernel

import "github.com/memcgd/memcgd/memcg"

// The model's ports of the kernel's formulas, exported to the external
// test package (crosscheck_test.go), which may import memcgd's own
// arithmetic (packages memcg and policy) to compare the two.

// PosRatioPolynom is posRatioPolynom.
func PosRatioPolynom(setpoint, dirty, limit int64) int64 {
	return posRatioPolynom(setpoint, dirty, limit)
}

// GlobalPosRatio is the global part of wbPositionRatio: 0 at or past the
// limit, the cubic below it.
func GlobalPosRatio(setpoint, dirty, limit int64) int64 {
	if dirty >= limit {
		return 0
	}
	return posRatioPolynom(setpoint, dirty, limit)
}

// Setpoint is wbPositionRatio's setpoint and hard limit for a domain's
// thresholds and trailing dirty_limit.
func Setpoint(thresh, bgThresh, domLimit int64) (setpoint, limit int64) {
	limit = hardDirtyLimit(domLimit, thresh)
	return (dirtyFreerunCeiling(thresh, bgThresh) + limit) / 2, limit
}

// DomainDirtyLimits is domainDirtyLimits over avail pages: the global
// domain when globalAvail is 0, else a memcg domain under a global one of
// globalAvail pages.
func DomainDirtyLimits(vm memcg.Knobs, avail, globalAvail int64) (bg, thresh int64) {
	d := dirtyThrottleControl{avail: avail}
	var g *dirtyThrottleControl
	if globalAvail > 0 {
		g = &dirtyThrottleControl{avail: globalAvail}
	}
	domainDirtyLimits(&d, g, &vm)
	return d.bgThresh, d.thresh
}

// MdtcCalcAvail is mdtcCalcAvail.
func MdtcCalcAvail(filepages, headroom, dirty, globalAvail, globalDirty int64) int64 {
	m := dirtyThrottleControl{dirty: dirty}
	mdtcCalcAvail(&m, &dirtyThrottleControl{avail: globalAvail, dirty: globalDirty}, filepages, headroom)
	return m.avail
}

// Seed004Level is one cgroup of seed 004's chain, in pages.
type Seed004Level struct {
	File, Free int64
	Knobs      memcg.Knobs
}

// Seed004Limits is seed004Limits.
func Seed004Limits(chain []Seed004Level) (bg, thresh int64) {
	c := make([]seed004Level, len(chain))
	for i := range chain {
		c[i] = seed004Level{file: chain[i].File, free: chain[i].Free, knobs: &chain[i].Knobs}
	}
	return seed004Limits(c)
}

// ReclaimWmarks is reclaimWmarks.
func ReclaimWmarks(minFreeKbytes, limit int64) (low, high int64) {
	return reclaimWmarks(minFreeKbytes, limit)
}

// DefaultKnobs is defaultKnobs.
func DefaultKnobs() memcg.Knobs { return defaultKnobs() }

// BandwidthInterval and MaxPause are BANDWIDTH_INTERVAL and MAX_PAUSE at hz.
func BandwidthInterval(hz int64) Time {
	k := &Kernel{cfg: Config{HZ: hz}}
	return k.bandwidthInterval()
}

// MaxPause is MAX_PAUSE at hz, as simulated time.
func MaxPause(hz int64) Time {
	k := &Kernel{cfg: Config{HZ: hz}}
	return k.fromJiffies(k.maxPause())
}
