package metrics

import (
	"bufio"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/state"
)

var update = flag.Bool("update", false, "rewrite testdata/metrics.golden from the current output")

const gib = 1 << 30

// snapshot is two cgroups as the daemon would report them: one on a v1
// memory controller without a limit of its own (failcnt and pgpgin/out,
// PSI from the unified hierarchy), one on v2 under memory.high (reclaim
// counters and memory.events), with dirty_bytes overridden.
func snapshot(t testing.TB) []state.Status {
	t.Helper()
	root := memcg.Stat{Usage: 8 * gib, Limit: 24 * gib, Max: 24 * gib, High: memcg.NoLimit, File: 5 * gib}

	v1 := memcg.Stat{
		Usage: 300 << 20, Limit: memcg.NoLimit, Max: memcg.NoLimit, High: memcg.NoLimit,
		File: 200 << 20, Anon: 100 << 20, Dirty: 12 << 20, Writeback: 1 << 20,
		Counters: memcg.Counters{HasPgpg: true, Pgpgin: 100000, Pgpgout: 50000, HasFailcnt: true, Failcnt: 3},
		Pressure: memcg.Pressure{Has: true, SomeTotal: 1234567, FullTotal: 234567, SomeAvg10: 0.5},
	}
	v1Knobs := memcg.DefaultKnobs()

	parent := memcg.Stat{Usage: 2 * gib, Limit: 4 * gib, Max: 4 * gib, High: memcg.NoLimit, File: 1 * gib}
	v2 := memcg.Stat{
		Usage: 700 << 20, Limit: 768 << 20, Max: 1 * gib, High: 768 << 20,
		File: 500 << 20, Anon: 200 << 20, Dirty: 20 << 20, Writeback: 4 << 20,
		Counters: memcg.Counters{
			HasReclaim: true, PgscanKswapd: 0, PgscanDirect: 40960, PgstealKswapd: 0, PgstealDirect: 30720, Pgrefill: 1000,
			HasEvents: true, EventsLow: 0, EventsHigh: 17, EventsMax: 2, EventsOOM: 1, EventsOOMKill: 1,
			HasWritten: true, WrittenBytes: 1 * gib,
		},
		Pressure: memcg.Pressure{Has: true, SomeTotal: 4500000, FullTotal: 2000000},
	}
	v2Knobs := memcg.DefaultKnobs()
	if err := v2Knobs.Apply(map[string]string{"dirty_bytes": "16M", "dirty_background_bytes": "8M"}); err != nil {
		t.Fatal(err)
	}
	observed := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	return []state.Status{
		{
			Cgroup: "/system.slice/app.service", Observed: observed, Stat: v1, Managed: true,
			Effective: memcg.Resolve([]memcg.Stat{root, v1}, []memcg.Knobs{memcg.DefaultKnobs(), v1Knobs}),
			Counters:  state.Counters{WriteOuts: 3, WriteOutBytes: 30 << 20},
			Exempt:    "not throttled: holds memcgd", Throttle: "not throttled: holds memcgd", DirtyTracking: state.TrackingPoll,
			State: state.StateIdle, Since: observed,
		},
		{
			Cgroup: "/kubepods/burstable/pod-db", Observed: observed, Stat: v2, Active: true, Managed: true,
			Effective: memcg.Resolve([]memcg.Stat{root, parent, v2}, []memcg.Knobs{memcg.DefaultKnobs(), memcg.DefaultKnobs(), v2Knobs}),
			Counters: state.Counters{
				ReclaimedBytes: 64 << 20, ReclaimRuns: 12, ReclaimOvershootBytes: 384 << 10, WriteOuts: 40, WriteOutBytes: 320 << 20, WriteOutsYielded: 9,
				Flushes: 2, FlushBytes: 1 << 20, FlushesRefused: 3, Pauses: 5, Paused: 1250 * time.Millisecond, Errors: 1,
				Paces: 7, PacedTime: 3500 * time.Millisecond, PaceHeld: 1200 * time.Millisecond,
				OverLimit: 900 * time.Millisecond, OverLimitQuarter: 40 * time.Millisecond,
			},
			DirtyTracking: state.TrackingTracker, State: state.StatePaced, Since: observed,
		},
	}
}

// scrape returns the /metrics page of a registry over sts.
func scrape(t *testing.T, sts func() []state.Status, opts ...Option) string {
	t.Helper()
	reg, err := NewRegistry(sts, opts...)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	Handler(reg, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d\n%s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// own drops the Go runtime's and the process's families, which vary from
// run to run.
func own(page string) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(page))
	for sc.Scan() {
		name := sc.Text()
		if rest, ok := strings.CutPrefix(name, "# HELP "); ok {
			name = rest
		} else if rest, ok := strings.CutPrefix(name, "# TYPE "); ok {
			name = rest
		}
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue
		}
		b.WriteString(sc.Text() + "\n")
	}
	return b.String()
}

// daemonOptions are the options the daemon passes (cmd/memcgd's run),
// with fixed values: the golden page holds every family it exports.
func daemonOptions(t *testing.T) []Option {
	t.Helper()
	journal := filepath.Join(t.TempDir(), "journal")
	if err := os.WriteFile(journal, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2025, 1, 2, 3, 0, 0, 0, time.UTC)
	reloads := NewConfigReloads(start)
	reloads.Succeeded(start.Add(90 * time.Second))
	reloads.Failed()
	return []Option{
		WithDropped(dropped(7)),
		WithDirtyTracking(state.TrackingTracker),
		WithBuildInfo(BuildInfo{Version: "v0.1.0", Revision: "0123456789abcdef0123456789abcdef01234567", GoVersion: "go1.26.8"}),
		WithConfigReloads(reloads),
		WithJournal(journal, func() int { return 2 }),
		WithCallCPU(func() map[string]time.Duration { return map[string]time.Duration{"write out": 1500 * time.Millisecond} }),
		WithCalls(func() map[string]uint64 { return map[string]uint64{"write out": 12} }),
		WithTimerLateness([]time.Duration{time.Millisecond, 10 * time.Millisecond},
			func() ([]uint64, time.Duration) { return []uint64{90, 9, 1}, 120 * time.Millisecond }),
	}
}

func TestMetricsGolden(t *testing.T) {
	sts := snapshot(t)
	got := own(scrape(t, func() []state.Status { return sts }, daemonOptions(t)...))
	golden := filepath.Join("testdata", "metrics.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("/metrics differs from %s (go test -update rewrites it):\n%s", golden, lineDiff(string(want), got))
	}
}

func TestMetricsLint(t *testing.T) {
	sts := snapshot(t)
	page := scrape(t, func() []state.Status { return sts }, daemonOptions(t)...)
	problems, err := promlint.New(strings.NewReader(page)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

func TestMetricsAreASnapshot(t *testing.T) {
	full := snapshot(t)
	later := snapshot(t)[1:]
	later[0].Stat.Usage = 710 << 20
	later[0].Counters.ReclaimRuns = 13
	scrapes := []struct {
		name    string
		sts     []state.Status
		present []string
		absent  []string
	}{
		{
			name: "first scrape",
			sts:  full,
			present: []string{
				`memcgd_cgroup_usage_bytes{cgroup="/kubepods/burstable/pod-db"} 734003200`,
				`memcgd_cgroup_usage_bytes{cgroup="/system.slice/app.service"} 314572800`,
			},
		},
		{
			name: "a cgroup gone and new figures: nothing is kept from the last scrape",
			sts:  later,
			present: []string{
				`memcgd_cgroup_usage_bytes{cgroup="/kubepods/burstable/pod-db"} 744488960`,
				`memcgd_cgroup_reclaim_runs_total{cgroup="/kubepods/burstable/pod-db"} 13`,
			},
			absent: []string{`cgroup="/system.slice/app.service"`, " 734003200\n"},
		},
		{
			name:   "no cgroups",
			sts:    nil,
			absent: []string{"memcgd_cgroup_"},
		},
	}
	var current []state.Status
	reg, err := NewRegistry(func() []state.Status { return current })
	if err != nil {
		t.Fatal(err)
	}
	h := Handler(reg, nil)
	for _, s := range scrapes {
		current = s.sts
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		page := rec.Body.String()
		for _, want := range s.present {
			if !strings.Contains(page, want+"\n") {
				t.Errorf("%s: no line %q", s.name, want)
			}
		}
		for _, not := range s.absent {
			if strings.Contains(page, not) {
				t.Errorf("%s: %q present", s.name, not)
			}
		}
	}
}

func TestUnknownKernelCountersAreAbsent(t *testing.T) {
	// Each cgroup of the snapshot reports only what its kernel has.
	page := own(scrape(t, func() []state.Status { return snapshot(t) }))
	tests := []struct {
		cg      host.Cgroup
		present []string
		absent  []string
	}{
		{
			cg:      "/system.slice/app.service",
			present: []string{"memcgd_cgroup_kernel_failcnt_total", "memcgd_cgroup_kernel_pgpg_pages_total", "memcgd_cgroup_memory_stall_seconds_total"},
			absent:  []string{"memcgd_cgroup_kernel_memory_events_total", "memcgd_cgroup_kernel_pgscan_pages_total", "memcgd_cgroup_kernel_pgsteal_pages_total"},
		},
		{
			cg:      "/kubepods/burstable/pod-db",
			present: []string{"memcgd_cgroup_kernel_memory_events_total", "memcgd_cgroup_kernel_pgscan_pages_total", "memcgd_cgroup_kernel_pgsteal_pages_total"},
			absent:  []string{"memcgd_cgroup_kernel_failcnt_total", "memcgd_cgroup_kernel_pgpg_pages_total"},
		},
	}
	for _, tt := range tests {
		has := func(family string) bool {
			return strings.Contains(page, family+`{cgroup="`+string(tt.cg)+`"`)
		}
		for _, f := range tt.present {
			if !has(f) {
				t.Errorf("%s: %s missing", tt.cg, f)
			}
		}
		for _, f := range tt.absent {
			if has(f) {
				t.Errorf("%s: %s present, but its kernel does not expose it", tt.cg, f)
			}
		}
	}
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	w, g := count(want), count(got)
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if g[l] == 0 {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if w[l] == 0 {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

// BenchmarkScrape10000 scrapes 10,000 managed cgroups, the size of seed
// 004's fio experiment, into a client that discards the page, and prints
// the page size and the process's peak RSS during the scrapes (VmHWM, reset
// through /proc/self/clear_refs before them). Targets (issue 9, defect 10):
// < 200 ms, < 32 MiB allocated per scrape, RSS < 64 MiB.
//
//	go test ./metrics -run '^$' -bench Scrape10000 -benchmem
func BenchmarkScrape10000(b *testing.B) {
	base := snapshot(b)
	sts := make([]state.Status, 10000)
	for i := range sts {
		sts[i] = base[i%2]
		sts[i].Cgroup = host.Cgroup(fmt.Sprintf("/kubepods/burstable/pod%05d/container", i))
	}
	reg, err := NewRegistry(func() []state.Status { return slices.Clone(sts) }) // the agent hands out a copy
	if err != nil {
		b.Fatal(err)
	}
	h := Handler(reg, nil)
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	runtime.GC()
	resetPeakRSS(b)
	cpu0 := cpuTime(b)
	var w discardWriter
	for b.Loop() {
		w.n = 0
		h.ServeHTTP(&w, req)
	}
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
	b.ReportMetric(float64(w.n), "bytes/scrape")
	b.ReportMetric(peakRSS(b)/(1<<20), "peak-RSS-MiB")
}

// discardWriter is a client that reads the page and drops it.
type discardWriter struct {
	n      int
	header http.Header
}

func (d *discardWriter) Header() http.Header {
	if d.header == nil {
		d.header = http.Header{}
	}
	return d.header
}
func (d *discardWriter) Write(p []byte) (int, error) { d.n += len(p); return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}

// resetPeakRSS resets the process's VmHWM to its current RSS
// (Documentation/filesystems/proc.rst, clear_refs value 5).
func resetPeakRSS(b *testing.B) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Logf("cannot reset peak RSS: %v", err)
	}
}

// peakRSS reads VmHWM from /proc/self/status, in bytes.
func peakRSS(b *testing.B) float64 {
	s, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(s), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(rest), "%f kB", &kb)
			return kb * 1024
		}
	}
	b.Fatal("no VmHWM in /proc/self/status")
	return 0
}

func TestDirtyTrackingPath(t *testing.T) {
	for _, path := range []string{state.TrackingTracker, state.TrackingPoll} {
		reg, err := NewRegistry(func() []state.Status { return nil }, WithDirtyTracking(path))
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		Handler(reg, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		other := state.TrackingPoll
		if path == other {
			other = state.TrackingTracker
		}
		for _, want := range []string{
			`memcgd_dirty_tracking_path{path="` + path + `"} 1`,
			`memcgd_dirty_tracking_path{path="` + other + `"} 0`,
		} {
			if !strings.Contains(rec.Body.String(), want+"\n") {
				t.Errorf("path %s: /metrics lacks %s", path, want)
			}
		}
	}
}
