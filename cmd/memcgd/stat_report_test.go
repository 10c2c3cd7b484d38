package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/memcgd/memcgd/control"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/state"
)

// What `memcgd stat` prints of a cgroup: whether memcgd manages it and
// why not; with the daemon, its state and since when, and dry_run when
// the daemon runs dry; and the knobs, thresholds and watermarks only
// where they are in force, for a managed cgroup.
func TestStatPrintsManagedAndState(t *testing.T) {
	since := time.Date(2026, 12, 1, 17, 22, 54, 0, time.UTC)
	fields := []memcg.Field{
		{Name: "usage", Value: 100 << 20, Known: true, Kind: memcg.KindBytes},
		{Name: "dirty_bytes", Value: 16 << 20, Known: true, Kind: memcg.KindBytes},
		{Name: "dirty_thresh", Value: 16 << 20, Known: true, Kind: memcg.KindBytes},
		{Name: "low_wmark", Value: 1 << 20, Known: true, Kind: memcg.KindBytes},
		{Name: "writeback_first", Value: 1, Known: true, Kind: memcg.KindFlag},
		{Name: "throttle_paces", Value: 3, Known: true},
	}
	tests := []struct {
		name string
		r    report
		text string
		json map[string]any
	}{
		{
			name: "daemon, managed, paced, dry run",
			r: report{Daemon: true, Report: control.Report{Cgroup: "/a", Fields: fields, Managed: true,
				State: state.StatePaced, Since: since, DryRun: true}},
			text: "cgroup /a\nmanaged true\nstate paced\nsince 2026-12-01T17:22:54Z\ndry_run true\n" +
				"usage 104857600\ndirty_bytes 16777216\ndirty_thresh 16777216\nlow_wmark 1048576\nwriteback_first true\nthrottle_paces 3\n",
			json: map[string]any{"cgroup": "/a", "managed": true, "state": "paced", "since": "2026-12-01T17:22:54Z", "dry_run": true,
				"stats": map[string]any{"usage": 104857600.0, "dirty_bytes": 16777216.0, "dirty_thresh": 16777216.0,
					"low_wmark": 1048576.0, "writeback_first": true, "throttle_paces": 3.0}},
		},
		{
			name: "daemon, managed, not stepped yet",
			r:    report{Daemon: true, Report: control.Report{Cgroup: "/a", Fields: fields[:1], Managed: true}},
			text: "cgroup /a\nmanaged true\nusage 104857600\n",
			json: map[string]any{"cgroup": "/a", "managed": true, "stats": map[string]any{"usage": 104857600.0}},
		},
		{
			name: "daemon, not managed: no knobs, thresholds nor watermarks",
			r: report{Daemon: true, Report: control.Report{Cgroup: "/", Fields: fields,
				Unmanaged: "it has no memory limit,\n and no ancestor below the root has one"}},
			text: "cgroup /\nmanaged false\nunmanaged it has no memory limit, and no ancestor below the root has one\n" +
				"usage 104857600\nthrottle_paces 3\n",
			json: map[string]any{"cgroup": "/", "managed": false,
				"unmanaged": "it has no memory limit,\n and no ancestor below the root has one",
				"stats":     map[string]any{"usage": 104857600.0, "throttle_paces": 3.0}},
		},
		{
			name: "no daemon, managed: no state",
			r:    report{Report: control.Report{Cgroup: "/a", Fields: fields[:2], Managed: true, State: state.StateFrozen, Since: since}},
			text: "cgroup /a\nmanaged true\nusage 104857600\ndirty_bytes 16777216\n",
			json: map[string]any{"cgroup": "/a", "managed": true, "stats": map[string]any{"usage": 104857600.0, "dirty_bytes": 16777216.0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var text bytes.Buffer
			if err := newReportWriter(&text, false).write(tt.r); err != nil {
				t.Fatal(err)
			}
			if text.String() != tt.text {
				t.Errorf("text:\n%s\nwant\n%s", text.String(), tt.text)
			}
			var js bytes.Buffer
			w := newReportWriter(&js, true)
			if err := w.write(tt.r); err != nil {
				t.Fatal(err)
			}
			if err := w.close(); err != nil {
				t.Fatal(err)
			}
			var got []map[string]any
			if err := json.Unmarshal(js.Bytes(), &got); err != nil {
				t.Fatalf("%v in %s", err, js.String())
			}
			if len(got) != 1 || !reflect.DeepEqual(got[0], tt.json) {
				t.Errorf("json:\n%s\nwant %v", js.String(), tt.json)
			}
		})
	}
}

// Every field memcg.Report gives from the config (knobs, thresholds,
// watermarks) is one stat leaves out for an unmanaged cgroup, and no
// other: the kernel's figures stay.
func TestPolicyFieldsAreTheConfigs(t *testing.T) {
	var policy []string
	for _, f := range memcg.Report(memcg.Stat{}, memcg.Effective{}) {
		if policyField(f.Name) {
			policy = append(policy, f.Name)
		}
	}
	want := "dirty_ratio dirty_bytes dirty_background_ratio dirty_background_bytes dirty_background_thresh dirty_thresh " +
		"min_free_kbytes low_wmark high_wmark writeback_first"
	if got := strings.Join(policy, " "); got != want {
		t.Errorf("policy fields %q, want %q", got, want)
	}
}
