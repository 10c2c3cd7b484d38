package run_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/memcgd/memcgd/sim/report"
	"github.com/memcgd/memcgd/sim/run"
	"github.com/memcgd/memcgd/sim/scenario"
)

// small is a machine small enough for a unit test: a writer pushes 512M
// through a 64M cgroup on a 200 MB/s disk, beside 200 cgroups holding
// 256K dirty each.
const small = `
version: 1
name: small
seed: 7
until: 120s
sample: 10ms
machine: {memory: 4G, cgroup: %s}
disks:
  - {name: vda, write_bandwidth: 200M, latency: 200us, nr_requests: 32, max_request: 512K}
cgroups:
  - path: /w
    limit: 64M
    knobs: {dirty_ratio: 10, dirty_background_ratio: 5}
  - {path: /idle, count: 200}
workloads:
  - {name: others, kind: dirtier, cgroup: /idle, size: 256K}
  - {name: %s, kind: %s, cgroup: /w, size: 512M, block: 16K, start: 500ms}
variants:
  - {name: stock}
  - {name: seed-000, kernel: [seed-000]}
  - {name: seed-001, kernel: [seed-001]}
  - {name: seed-004, kernel: [seed-004]}
  - {name: memcgd, memcgd: {interval: 50ms}}
report: {workload: %s, focus: /w}
`

func runSmall(t *testing.T, cgroup, kind string) map[string]*run.Result {
	t.Helper()
	sc, err := scenario.Parse([]byte(fmt.Sprintf(small, cgroup, "w", kind, "w")))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*run.Result{}
	for _, v := range sc.Variants {
		r, err := run.Variant(sc, v, nil)
		if err != nil {
			t.Fatal(err)
		}
		out[v.Name] = r
	}
	return out
}

func wl(r *run.Result, name string) run.WorkloadResult {
	for _, w := range r.Workloads {
		if w.Name == name {
			return w
		}
	}
	panic("no workload " + name)
}

// Seed 001, step 5: "Most of clean pages are reclaimed at background
// instead of direct reclaim." (Step 3, with dirty pages, is not checked: in
// the 6.x model reclaim never writes a page itself, so a per-cgroup kswapd
// cannot get ahead of a writer whose pages are all dirty; docs/sim.md.)
func TestSeed001KswapdTakesReclaimFromDirect(t *testing.T) {
	for _, cg := range []string{"v1", "v2"} {
		rs := runSmall(t, cg, "reader")
		stock, patched := rs["stock"].FocusCounts, rs["seed-001"].FocusCounts
		if stock.KswapdSteal != 0 || stock.PgPgsteal == 0 {
			t.Fatalf("%s stock: kswapd_steal %d, pg_pgsteal %d: want all reclaim direct", cg, stock.KswapdSteal, stock.PgPgsteal)
		}
		total := patched.KswapdSteal + patched.PgPgsteal
		if total == 0 || float64(patched.KswapdSteal) < 0.95*float64(total) {
			t.Errorf("%s reader with seed 001: kswapd_steal %d of %d reclaimed: want at least 95%%", cg, patched.KswapdSteal, total)
		}
		if patched.Pgoutrun == 0 || patched.Allocstall >= stock.Allocstall {
			t.Errorf("%s reader: pgoutrun %d, allocstall %d (stock %d): want background runs and fewer direct reclaims",
				cg, patched.Pgoutrun, patched.Allocstall, stock.Allocstall)
		}
	}
}

// Seed 004: "Control the maximum amount of dirty pages a cgroup can have
// at any given time."
func TestSeed004DirtyBoundedByCgroupLimit(t *testing.T) {
	for _, cg := range []string{"v1", "v2"} {
		rs := runSmall(t, cg, "writer")
		r := rs["seed-004"]
		// dirty_ratio 10 of (file + headroom) = 64M: 6.4M.
		limit := int64(64<<20) / 10 / 4096
		if r.PeakDirty > limit*11/10 {
			t.Errorf("%s seed 004: peak dirty+writeback %d pages: want at most 1.1 × the cgroup's limit %d", cg, r.PeakDirty, limit)
		}
		if s := rs["stock"]; cg == "v1" && s.PeakDirty < 4*limit {
			t.Errorf("v1 stock: peak dirty+writeback %d pages: want the cgroup to fill with dirty pages (no per-cgroup limit)", s.PeakDirty)
		}
		if wl(r, "w").Pauses == 0 {
			t.Errorf("%s seed 004: no throttle pauses", cg)
		}
	}
}

// Seed 000: "replace the full flush with flushing writeback of memory
// cgroup whose tasks tries to reclaim memory".
func TestSeed000LeavesOtherCgroupsDirtyPagesAlone(t *testing.T) {
	rs := runSmall(t, "v1", "writer")
	stock, patched := rs["stock"], rs["seed-000"]
	if w := wl(stock, "others").Counts.Written; w == 0 || stock.FullFlushes == 0 {
		t.Fatalf("stock: others written %d pages, %d full flushes: want reclaim's flush to write them", w, stock.FullFlushes)
	}
	if w := wl(patched, "others").Counts.Written; w != 0 {
		t.Errorf("seed 000: others written %d pages: want 0", w)
	}
	if patched.FullFlushes != 0 || patched.MemcgFirst == 0 {
		t.Errorf("seed 000: %d full flushes, %d memcg-first: want only memcg-first", patched.FullFlushes, patched.MemcgFirst)
	}
	if a, b := wl(patched, "w").Throughput(), wl(stock, "w").Throughput(); a < b {
		t.Errorf("seed 000: writer %.0f B/s < stock %.0f B/s: want no loss", a, b)
	}
}

// The same scenario and seed give byte-identical reports and CSV.
func TestDeterministic(t *testing.T) {
	render := func() []byte {
		sc, err := scenario.Parse([]byte(fmt.Sprintf(small, "v2", "w", "writer", "w")))
		if err != nil {
			t.Fatal(err)
		}
		var rs []*run.Result
		for _, v := range sc.Variants {
			r, err := run.Variant(sc, v, nil)
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, r)
		}
		var b bytes.Buffer
		if err := report.Write(&b, sc, rs); err != nil {
			t.Fatal(err)
		}
		if err := report.CSV(&b, rs); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	a, b := render(), render()
	if !bytes.Equal(a, b) {
		t.Fatalf("two runs differ (%d and %d bytes)", len(a), len(b))
	}
	if len(a) < 1000 {
		t.Fatalf("report is only %d bytes", len(a))
	}
}

// Seed 001, step 3: "It used to be all the pages are reclaimed from direct
// reclaim, and now most of the pages are reclaimed at background." The
// seed's pg_scan = pg_pgsteal says every page was clean when reclaim met
// it: the global dirty limit held the cgroup's dirty pages below its
// limit. So it holds with the embedded scenario's 2G machine (dirty limit
// 356M under the 500M cgroup), and not on a 32G machine, where the
// cgroup fills with dirty pages and its writer's own limit reclaim takes
// each page as its writeback completes, as often as kswapd does.
func TestSeed001DirtyPagesKswapdTakesReclaimWhenTheDirtyLimitIsBelowTheCgroup(t *testing.T) {
	b, err := scenario.Embedded("seed-001")
	if err != nil {
		t.Fatal(err)
	}
	share := func(memory string) (kswapd float64, stock, patched run.Result) {
		t.Helper()
		a, err := scenario.ParseAssignment("machine.memory=" + memory)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := scenario.Parse(b, a)
		if err != nil {
			t.Fatal(err)
		}
		rs := map[string]*run.Result{}
		for _, v := range sc.Variants {
			if v.Memcgd != nil {
				continue
			}
			r, err := run.Variant(sc, v, nil)
			if err != nil {
				t.Fatal(err)
			}
			rs[v.Name] = r
		}
		c := rs["memcg-kswapd"].FocusCounts
		return float64(c.KswapdSteal) / float64(c.KswapdSteal+c.PgPgsteal), *rs["stock"], *rs["memcg-kswapd"]
	}
	small, stock, patched := share("2G")
	t.Logf("2G: kswapd takes %.1f%%; stock pg_scan %d, pg_pgsteal %d, allocstall %d; patched allocstall %d",
		100*small, stock.FocusCounts.PgScan, stock.FocusCounts.PgPgsteal, stock.FocusCounts.Allocstall, patched.FocusCounts.Allocstall)
	if small < 0.95 {
		t.Errorf("2G machine: kswapd takes %.1f%% of reclaim, want ≥ 95%% (seed: 5121516 of 5121548)", 100*small)
	}
	if s := stock.FocusCounts; s.PgScan > s.PgPgsteal*11/10 {
		t.Errorf("2G stock: pg_scan %d against pg_pgsteal %d: want each page scanned once, as in the seed", s.PgScan, s.PgPgsteal)
	}
	if patched.FocusCounts.Allocstall*100 > stock.FocusCounts.Allocstall {
		t.Errorf("2G: allocstall %d with seed 001 against %d stock: want almost none (seed: 1 against 158009)", patched.FocusCounts.Allocstall, stock.FocusCounts.Allocstall)
	}
	big, _, _ := share("32G")
	t.Logf("32G: kswapd takes %.1f%%", 100*big)
	if big > 0.5 {
		t.Errorf("32G machine: kswapd takes %.1f%%: the global dirty limit is above the cgroup's, so its pages are dirty at the tail and the writer's own reclaim should take most", 100*big)
	}
}

// Seed 004, Vivek Goyal: "For me even with this version I see that group
// with 100M limit is getting much more BW" (205-217 MB/s against 77 in
// the root). The thread's numbers put the cause in the disk: the 100M
// cgroup must have written ≥ 3.9G to disk in 21 s, while the root run
// cannot have written faster than 77 MB/s. This checks the model's side
// of docs/sim.md's explanation: with a disk whose bandwidth does not
// depend on who submits the writes, neither the 6.x throttle nor 2.6.33's
// (the dirtier writing back itself, congestion_wait) slows the root dd
// below the disk's rate, so the order stays root first.
func TestSeed004AnomalyNeedsADiskLossNotTheThrottle(t *testing.T) {
	sc, rs, _ := runEmbedded(t, "seed-004")
	disk := float64(sc.Disks[0].WriteBandwidth)
	for _, v := range []string{"stock", "stock-2.6.33"} {
		root, test1 := wl(rs[v], "dd-root").Throughput(), wl(rs[v], "dd-test1").Throughput()
		t.Logf("%s: root %.1f MB/s, /test1 %.1f MB/s, disk %.1f", v, root/1e6, test1/1e6, disk/1e6)
		if root < disk || root <= test1 {
			t.Errorf("%s: root %.1f MB/s, /test1 %.1f MB/s, disk %.1f: want the root at least at the disk's rate and ahead", v, root/1e6, test1/1e6, disk/1e6)
		}
	}
	if p := wl(rs["stock-2.6.33"], "dd-root").Pauses; p == 0 {
		t.Errorf("stock-2.6.33: the root dd never entered the old throttle's congestion_wait")
	}
}
