package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"

	"github.com/memcgd/memcgd/sim/kernel"
	"github.com/memcgd/memcgd/sim/run"
)

// csvHeader names the time-series columns; sizes are MiB, times seconds.
var csvHeader = []string{"variant", "t_s", "usage_mib", "limit_mib", "free_mib", "file_mib", "anon_mib",
	"dirty_mib", "writeback_mib", "dirty_bg_thresh_mib", "dirty_thresh_mib", "wmark_low_mib", "wmark_high_mib",
	"node_free_mib", "node_dirty_mib", "node_writeback_mib", "global_bg_thresh_mib", "global_thresh_mib",
	"disk_write_mbps"}

// CSV writes every variant's time series of the focus cgroup.
func CSV(w io.Writer, rs []*run.Result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	m := func(p int64) string {
		if p < 0 {
			return ""
		}
		return strconv.FormatFloat(float64(p)*kernel.PageSize/(1<<20), 'f', 3, 64)
	}
	for _, r := range rs {
		for i, s := range r.Samples {
			rate := ""
			if i > 0 {
				p := r.Samples[i-1]
				rate = fmt.Sprintf("%.1f", float64(s.DiskWritten-p.DiskWritten)*kernel.PageSize/1e6/(s.T-p.T).Seconds())
			}
			rec := []string{r.Variant, strconv.FormatFloat(s.T.Seconds(), 'f', 3, 64), m(s.Usage), m(s.Limit), m(s.Free),
				m(s.File), m(s.Anon), m(s.Dirty), m(s.Writeback), m(s.BgThresh), m(s.Thresh), m(s.WmarkLow), m(s.WmarkHigh),
				m(s.NodeFree), m(s.NodeDirty), m(s.NodeWB), m(s.GlobalBg), m(s.GlobalThresh), rate}
			if err := cw.Write(rec); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}
