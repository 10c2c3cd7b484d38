package kernel

// /proc/vmstat (mm/vmstat.c vmstat_text[]): the node's counters the model
// keeps, under their kernel names.

// Vmstat items.
const (
	NrDirtied = iota
	NrWritten
	NrVmscanImmediateReclaim
	NrThrottledWritten
	PgscanKswapd
	PgscanDirect
	PgstealKswapd
	PgstealDirect
	Pgrefill
	Pgactivate
	Pgdeactivate
	Pgrotated
	Pageoutrun
	AllocstallNormal
	nrVmstat
)

var vmstatNames = [nrVmstat]string{
	"nr_dirtied", "nr_written", "nr_vmscan_immediate_reclaim", "nr_throttled_written",
	"pgscan_kswapd", "pgscan_direct", "pgsteal_kswapd", "pgsteal_direct",
	"pgrefill", "pgactivate", "pgdeactivate", "pgrotated", "pageoutrun", "allocstall_normal",
}

// VmstatLine is one /proc/vmstat line.
type VmstatLine struct {
	Name  string
	Value int64
}

// Vmstat returns /proc/vmstat as the model has it: the gauges first, then
// the counters, in the kernel's order.
func (k *Kernel) Vmstat() []VmstatLine {
	nd := &k.node
	root := &k.memcgs[0]
	bg, thresh := k.globalDirtyLimits()
	out := []VmstatLine{
		{"nr_free_pages", nd.free()},
		{"nr_inactive_anon", root.hstat[msInactiveAnon]},
		{"nr_active_anon", root.hstat[msActiveAnon]},
		{"nr_inactive_file", root.hstat[msInactiveFile]},
		{"nr_active_file", root.hstat[msActiveFile]},
		{"nr_dirty", root.hstat[msFileDirty]},
		{"nr_writeback", root.hstat[msFileWriteback]},
		{"nr_dirty_threshold", thresh},
		{"nr_dirty_background_threshold", bg},
	}
	for i, name := range vmstatNames {
		out = append(out, VmstatLine{name, nd.vmstat[i]})
	}
	return out
}

// isqrt is int_sqrt() (lib/math/int_sqrt.c).
func isqrt(x uint64) uint64 {
	if x < 2 {
		return x
	}
	m := uint64(1)
	for m <= x/4 {
		m <<= 2
	}
	var y uint64
	for m != 0 {
		b := y + m
		y >>= 1
		if x >= b {
			x -= b
			y += m
		}
		m >>= 2
	}
	return y
}
