// Package sweep runs a scenario over a grid of field values, in parallel,
// optionally one shard of the grid, and merges shard outputs into exactly
// what the unsharded run prints.
package sweep

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/memcgd/memcgd/sim/run"
	"github.com/memcgd/memcgd/sim/scenario"
)

// Axis is one swept field and its values.
type Axis struct {
	Path   string
	Values []string
}

// ParseAxis reads "path=v1,v2,...".
func ParseAxis(s string) (Axis, error) {
	p, vs, ok := strings.Cut(s, "=")
	if !ok || p == "" || vs == "" {
		return Axis{}, fmt.Errorf("--set %q: want path=v1,v2,..., such as cgroups[0].limit=100M,200M", s)
	}
	return Axis{Path: p, Values: strings.Split(vs, ",")}, nil
}

// Shard is slice Index of Count (0-based); points go to shards round robin.
type Shard struct{ Index, Count int }

// ParseShard reads "i/n".
func ParseShard(s string) (Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("--shard %q: want i/n with 0 <= i < n, such as 0/4", s)
	}
	return Shard{i, n}, nil
}

// Points is the grid, the first axis slowest.
func Points(axes []Axis) [][]scenario.Assignment {
	pts := [][]scenario.Assignment{nil}
	for _, ax := range axes {
		var next [][]scenario.Assignment
		for _, p := range pts {
			for _, v := range ax.Values {
				next = append(next, append(slices.Clone(p), scenario.Assignment{Path: ax.Path, Value: v}))
			}
		}
		pts = next
	}
	return pts
}

// header is the first line of a sweep's output.
func header(axes []Axis) string {
	cols := []string{"point"}
	for _, a := range axes {
		cols = append(cols, a.Path)
	}
	cols = append(cols, "variant", "workload", "mbps", "stall_s", "paused_s", "peak_dirty_mib", "p99_dirty_mib",
		"pgsteal_kswapd", "pgsteal_direct", "full_flushes", "others_written_mib")
	return strings.Join(cols, ",")
}

// Run runs the points of the grid that belong to shard, jobs at a time,
// and writes one CSV line per point and variant, in grid order.
func Run(w io.Writer, yaml []byte, axes []Axis, shard Shard, jobs int) error {
	pts := Points(axes)
	var mine []int
	for i := range pts {
		if i%shard.Count == shard.Index {
			mine = append(mine, i)
		}
	}
	out := make([]string, len(pts))
	errs := make([]error, len(pts))
	sem := make(chan struct{}, max(jobs, 1))
	var wg sync.WaitGroup
	for _, i := range mine {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i], errs[i] = point(yaml, i, pts[i])
		}()
	}
	wg.Wait()
	var b bytes.Buffer
	b.WriteString(header(axes) + "\n")
	for _, i := range mine {
		if errs[i] != nil {
			return errs[i]
		}
		b.WriteString(out[i])
	}
	_, err := w.Write(b.Bytes())
	return err
}

func point(yaml []byte, idx int, as []scenario.Assignment) (string, error) {
	sc, err := scenario.Parse(yaml, as...)
	if err != nil {
		return "", fmt.Errorf("point %d: %w", idx, err)
	}
	var b strings.Builder
	for _, v := range sc.Variants {
		r, err := run.Variant(sc, v, nil)
		if err != nil {
			return "", fmt.Errorf("point %d: %w", idx, err)
		}
		var wl run.WorkloadResult
		var othersWritten int64
		for _, x := range r.Workloads {
			if x.Name == sc.Report.Workload {
				wl = x
			}
			if x.Kind == scenario.KindDirtier {
				othersWritten += x.Counts.Written
			}
		}
		cols := []string{strconv.Itoa(idx)}
		for _, a := range as {
			cols = append(cols, a.Value)
		}
		c := r.FocusCounts
		cols = append(cols, v.Name, wl.Name,
			fmt.Sprintf("%.1f", wl.Throughput()/1e6), fmt.Sprintf("%.3f", wl.Stall.Seconds()),
			fmt.Sprintf("%.3f", wl.Paused.Seconds()), mibStr(r.PeakDirty), mibStr(r.P99Dirty),
			strconv.FormatInt(c.KswapdSteal+c.ProactiveSteal, 10), strconv.FormatInt(c.PgPgsteal-c.ProactiveSteal, 10),
			strconv.FormatInt(r.FullFlushes, 10), mibStr(othersWritten))
		b.WriteString(strings.Join(cols, ",") + "\n")
	}
	return b.String(), nil
}

func mibStr(pages int64) string { return fmt.Sprintf("%.1f", float64(pages)*4096/(1<<20)) }

// Merge combines shard outputs into the unsharded output: one header, the
// lines in point order (a point's lines stay in variant order).
func Merge(w io.Writer, first io.Reader, more ...io.Reader) error {
	shards := append([]io.Reader{first}, more...)
	var head string
	type line struct {
		point, seq int
		text       string
	}
	var lines []line
	for si, r := range shards {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		first := true
		seq := 0
		for sc.Scan() {
			t := sc.Text()
			if first {
				first = false
				if head != "" && t != head {
					return fmt.Errorf("shard %d: header %q differs from %q: not the same sweep", si, t, head)
				}
				head = t
				continue
			}
			p, _, _ := strings.Cut(t, ",")
			n, err := strconv.Atoi(p)
			if err != nil {
				return fmt.Errorf("shard %d: line %q: no point number", si, t)
			}
			lines = append(lines, line{n, seq, t})
			seq++
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("shard %d: %w", si, err)
		}
	}
	slices.SortStableFunc(lines, func(a, b line) int { return a.point - b.point })
	var b bytes.Buffer
	b.WriteString(head + "\n")
	for _, l := range lines {
		b.WriteString(l.text + "\n")
	}
	_, err := w.Write(b.Bytes())
	return err
}
