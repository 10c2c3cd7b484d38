package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/memcgd/memcgd/control"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// The streamed JSON is byte for byte what encoding the whole list with
// json.Encoder and a two-space indent gives, as `memcgd stat --json`
// printed before it streamed.
func TestReportWriterJSONMatchesTheWholeList(t *testing.T) {
	type entry struct {
		Cgroup  host.Cgroup    `json:"cgroup"`
		Managed bool           `json:"managed"`
		State   string         `json:"state,omitempty"`
		Since   string         `json:"since,omitempty"`
		DryRun  bool           `json:"dry_run,omitempty"`
		Stats   map[string]any `json:"stats"`
	}
	since := time.Date(2026, 12, 1, 17, 22, 54, 5e6, time.UTC)
	for _, n := range []int{0, 1, 3} {
		var reports []report
		want := []entry{}
		for i := range n {
			v := uint64(i) << 20
			r := report{Report: control.Report{Cgroup: host.Cgroup(fmt.Sprintf("/c%d", i)), Managed: true, Fields: []memcg.Field{
				{Name: "usage", Value: v, Known: true, Kind: memcg.KindBytes}, {Name: "pgpgin", Known: false},
				{Name: "limit", Value: memcg.NoLimit, Known: true, Kind: memcg.KindBytes},
				{Name: "writeback_first", Value: 1, Known: true, Kind: memcg.KindFlag},
			}}}
			// n/a and no limit are null, a flag a boolean.
			e := entry{Cgroup: r.Cgroup, Managed: true, Stats: map[string]any{"usage": v, "pgpgin": nil, "limit": nil, "writeback_first": true}}
			if i == 1 {
				// The daemon's: its state, since when, and that it runs dry.
				r.Daemon, r.State, r.Since, r.DryRun = true, "paced", since, true
				e.State, e.Since, e.DryRun = "paced", "2026-12-01T17:22:54.005Z", true
			}
			reports = append(reports, r)
			want = append(want, e)
		}
		var whole bytes.Buffer
		enc := json.NewEncoder(&whole)
		enc.SetIndent("", "  ")
		if err := enc.Encode(want); err != nil {
			t.Fatal(err)
		}
		var streamed bytes.Buffer
		w := newReportWriter(&streamed, true)
		for _, r := range reports {
			if err := w.write(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.close(); err != nil {
			t.Fatal(err)
		}
		if streamed.String() != whole.String() {
			t.Errorf("%d reports: streamed\n%s\nwant\n%s", n, streamed.String(), whole.String())
		}
	}
}
