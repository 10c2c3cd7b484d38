package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/state"
)

// Defect 10: a cgroup name that is not UTF-8 (mkdir accepts any bytes)
// made MustNewConstMetric panic, and the scrape stopped at that cgroup.
// Now the cgroup is left out and counted, and every other cgroup is
// exported, before and after it.
func TestInvalidUTF8NameIsSkippedAndCounted(t *testing.T) {
	base := snapshot(t)
	sts := []state.Status{base[0], base[1], base[1]}
	sts[0].Cgroup = "/a"
	sts[1].Cgroup = "/b/caf\xe9" // Latin-1, as a tenant's mkdir may pass it
	sts[2].Cgroup = "/c"
	reg, err := NewRegistry(func() []state.Status { return sts })
	if err != nil {
		t.Fatal(err)
	}
	h := Handler(reg, nil)
	for scrapeNo := 1; scrapeNo <= 2; scrapeNo++ {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		page := rec.Body.String()
		for _, want := range []string{
			`memcgd_cgroup_usage_bytes{cgroup="/a"} `,
			`memcgd_cgroup_usage_bytes{cgroup="/c"} `,
			`memcgd_cgroup_writeout_total{cgroup="/c",kind="targeted"} `,
			"go_goroutines ",
		} {
			if !strings.Contains(page, want) {
				t.Errorf("scrape %d: no %q: the scrape stopped early", scrapeNo, want)
			}
		}
		if strings.Contains(page, "caf") {
			t.Errorf("scrape %d: the invalid name is exported", scrapeNo)
		}
		want := "memcgd_metrics_invalid_names_total " + string(rune('0'+scrapeNo)) + "\n"
		if !strings.Contains(page, want) {
			t.Errorf("scrape %d: no %q", scrapeNo, want)
		}
	}
}

// Defect 10: unmanaged cgroups (no limit with limited_only) were exported.
func TestOnlyManagedCgroupsAreExported(t *testing.T) {
	sts := snapshot(t)
	sts[0].Managed = false
	page := scrape(t, func() []state.Status { return sts })
	if strings.Contains(page, string(sts[0].Cgroup)) {
		t.Errorf("unmanaged %s exported", sts[0].Cgroup)
	}
	if !strings.Contains(page, `memcgd_cgroup_usage_bytes{cgroup="`+string(sts[1].Cgroup)+`"}`) {
		t.Errorf("managed %s missing", sts[1].Cgroup)
	}
}

// Label values are escaped as the text format wants.
func TestLabelEscaping(t *testing.T) {
	sts := snapshot(t)[:1]
	sts[0].Cgroup = host.Cgroup("/a\"b\\c\nd")
	page := scrape(t, func() []state.Status { return sts })
	if !strings.Contains(page, `memcgd_cgroup_usage_bytes{cgroup="/a\"b\\c\nd"} `) {
		t.Errorf("escaped name missing:\n%s", page)
	}
}

type dropped uint64

func (d dropped) Dropped() uint64 { return uint64(d) }

func TestWatcherDroppedExported(t *testing.T) {
	reg, err := NewRegistry(func() []state.Status { return nil }, WithDropped(dropped(42)))
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	Handler(reg, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "memcgd_watcher_dropped_reports_total 42\n") {
		t.Errorf("no memcgd_watcher_dropped_reports_total 42 in\n%s", own(rec.Body.String()))
	}
}

// Scrapes beyond maxRequestsInFlight are refused with 503 rather than
// each holding a copy of every cgroup's status.
func TestMaxRequestsInFlight(t *testing.T) {
	release := make(chan struct{})
	var entered sync.WaitGroup
	entered.Add(maxRequestsInFlight)
	reg, err := NewRegistry(func() []state.Status {
		entered.Done() // only scrapes let in take a snapshot
		<-release
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	h := Handler(reg, nil)
	var wg sync.WaitGroup
	for range maxRequestsInFlight {
		wg.Go(func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			if rec.Code != http.StatusOK {
				t.Errorf("scrape in the limit: %d", rec.Code)
			}
		})
	}
	entered.Wait()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("scrape over the limit: %d, want 503", rec.Code)
	}
	close(release)
	wg.Wait()
}

// A scrape whose context ends stops writing.
func TestScrapeStopsWhenCancelled(t *testing.T) {
	sts := make([]state.Status, 1000)
	for i := range sts {
		sts[i] = snapshot(t)[1]
	}
	reg, err := NewRegistry(func() []state.Status { return sts })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var b strings.Builder
	if err := reg.WriteText(ctx, &b); err == nil {
		t.Errorf("WriteText with a done context: nil error, wrote %d bytes", b.Len())
	}
}
