package metrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/memcgd/memcgd/state"
)

// The reload families after each of a sequence of reloads: the start's
// load is the first success but no reload; a failure keeps the last
// success's time.
func TestConfigReloads(t *testing.T) {
	start := time.Unix(1700000000, 0)
	c := NewConfigReloads(start)
	reg, err := NewRegistry(func() []state.Status { return nil }, WithConfigReloads(c))
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		do   func()
		want []string
	}{
		{"started", func() {}, []string{
			`memcgd_config_reloads_total{result="failure"} 0`,
			`memcgd_config_reloads_total{result="success"} 0`,
			"memcgd_config_last_reload_successful 1",
			"memcgd_config_last_reload_success_timestamp_seconds 1.7e+09",
		}},
		{"a bad config", c.Failed, []string{
			`memcgd_config_reloads_total{result="failure"} 1`,
			`memcgd_config_reloads_total{result="success"} 0`,
			"memcgd_config_last_reload_successful 0",
			"memcgd_config_last_reload_success_timestamp_seconds 1.7e+09",
		}},
		{"a good one", func() { c.Succeeded(start.Add(2500 * time.Millisecond)) }, []string{
			`memcgd_config_reloads_total{result="failure"} 1`,
			`memcgd_config_reloads_total{result="success"} 1`,
			"memcgd_config_last_reload_successful 1",
			"memcgd_config_last_reload_success_timestamp_seconds 1.7000000025e+09",
		}},
	}
	for _, s := range steps {
		s.do()
		rec := httptest.NewRecorder()
		Handler(reg, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		for _, want := range s.want {
			if !strings.Contains(rec.Body.String(), want+"\n") {
				t.Errorf("%s: no line %q in\n%s", s.name, want, own(rec.Body.String()))
			}
		}
	}
}
