package memcg

// Effective are the settings in force for one cgroup: its own knobs, its
// dirty thresholds (never above its ancestors', see EffectiveDirtyLimits)
// and its reclaim watermarks (from its own limit and min_free_kbytes).
type Effective struct {
	Knobs      Knobs
	Dirty      DirtyLimits
	Watermarks Watermarks
}

// Resolve computes the effective settings of the last cgroup of chain
// (root first); knobs[i] belongs to chain[i].
func Resolve(chain []Stat, knobs []Knobs) Effective {
	self, k := chain[len(chain)-1], knobs[len(knobs)-1]
	return Effective{
		Knobs:      k,
		Dirty:      EffectiveDirtyLimits(chain, knobs),
		Watermarks: k.Watermarks(self.Limit),
	}
}
