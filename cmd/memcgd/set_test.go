package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memcgd/memcgd/control"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/overrides"
	"github.com/memcgd/memcgd/state"
)

func TestParsePairs(t *testing.T) {
	tests := []struct {
		args   []string
		want   map[string]string
		errHas []string
	}{
		{args: []string{"dirty_bytes=16M", "writeback_first=false"}, want: map[string]string{"dirty_bytes": "16M", "writeback_first": "false"}},
		{args: []string{"dirty_ratio="}, errHas: []string{`argument "dirty_ratio="`, `dirty_ratio: invalid value ""`, "0 to 100"}},
		{args: []string{"min_free_kbytes=auto", "dirty_ratoi=5"}, errHas: []string{`argument "dirty_ratoi=5": unknown knob "dirty_ratoi"`, `did you mean "dirty_ratio"?`}},
		{args: []string{"dirty_ratio=5", "dirty_bytes=1G"}, errHas: []string{`argument "dirty_bytes=1G"`, "only one of dirty_ratio and dirty_bytes"}},
		{args: []string{"dirty_ratio"}, errHas: []string{`"dirty_ratio"`, "want knob=value", "dirty_ratio=15"}},
		{args: []string{"=15"}, errHas: []string{`"=15"`, "want knob=value"}},
		{args: []string{"dirty_ratio=15", "dirty_ratio=20"}, errHas: []string{`"dirty_ratio=20"`, "dirty_ratio given twice"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := parsePairs(tt.args)
			if len(tt.errHas) == 0 {
				if err != nil || !maps.Equal(got, tt.want) {
					t.Errorf("parsePairs = %v, %v; want %v", got, err, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("parsePairs = %v, want an error", got)
			}
			for _, s := range tt.errHas {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

// fakeDaemon serves the control socket for the root cgroup "/" with
// real overrides over the default knobs.
type fakeDaemon struct {
	overrides *overrides.Overrides
	stat      memcg.Stat
}

func (d *fakeDaemon) effective(cg host.Cgroup) memcg.Effective {
	return memcg.Resolve([]memcg.Stat{d.stat}, []memcg.Knobs{d.overrides.Apply(cg, memcg.DefaultKnobs())})
}

func (d *fakeDaemon) Set(cg host.Cgroup, knobs map[string]string) error {
	return d.overrides.Set(cg, knobs)
}

func (d *fakeDaemon) Get(cg host.Cgroup) (control.GetResult, error) {
	return state.NewSettings(cg, d.effective(cg), d.overrides.Get(cg)), nil
}

func (d *fakeDaemon) Reset(cg host.Cgroup) error { return d.overrides.Delete(cg) }

func (d *fakeDaemon) Status(cg host.Cgroup) ([]state.Status, error) {
	if cg != "" && cg != "/" {
		return nil, fmt.Errorf("cgroup %s: not managed", cg)
	}
	return []state.Status{{Cgroup: "/", Stat: d.stat, Effective: d.effective("/"), Counters: state.Counters{ReclaimedBytes: 40960, ReclaimRuns: 2},
		Managed: true, State: state.StateIdle, Since: time.Date(2026, 12, 1, 17, 22, 54, 0, time.UTC)}}, nil
}

// memcgd runs the command line and returns its output.
func memcgd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := newRootCmd(&out, &out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestSetGetStatThroughTheDaemon(t *testing.T) {
	ov, err := overrides.Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	d := &fakeDaemon{overrides: ov, stat: memcg.Stat{Usage: 300 << 20, Limit: 500 << 20, File: 200 << 20, Dirty: 5 << 20}}
	sock := filepath.Join(t.TempDir(), "control.sock")
	ln, err := control.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&control.Server{Backend: d}).Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()

	// "/" resolves on any host with a memory cgroup mount.
	tests := []struct {
		args    []string
		outHas  []string
		errHas  []string
		knobErr bool // the error is the daemon's *memcg.KnobError
	}{
		{
			args:   []string{"set", "--socket", sock, "/", "dirty_bytes=16M", "writeback_first=0"},
			outHas: []string{"cgroup /\n", "dirty_ratio 0\n", "dirty_bytes 16777216 (override)\n", "writeback_first false (override)\n", "dirty_thresh 16777216\n"},
		},
		{
			args:   []string{"get", "--socket", sock, "/"},
			outHas: []string{"dirty_bytes 16777216 (override)\n", "dirty_background_ratio 10\n", "low_wmark "},
		},
		{
			args:   []string{"get", "--socket", sock, "--json", "/"},
			outHas: []string{`"dirty_bytes": 16777216`, `"dirty_thresh": 16777216`, `"writeback_first": false`, `"min_free_kbytes": "auto"`, `"dirty_ratio": 0`},
		},
		{
			args:    []string{"set", "--socket", sock, "/", "dirty_ratio=101"},
			errHas:  []string{`argument "dirty_ratio=101"`, "dirty_ratio", `"101"`, "0 to 100"},
			knobErr: true, // refused before the daemon is asked
		},
		{
			args:   []string{"set", "--socket", sock, "/", "dirty_ratio"},
			errHas: []string{`argument "dirty_ratio": want knob=value`},
		},
		{
			args:   []string{"set", "--socket", sock, "/"},
			errHas: []string{"want at least one knob=value"},
		},
		{
			args:   []string{"set", "--socket", sock, "--reset", "/"},
			outHas: []string{"dirty_bytes 0\n", "dirty_ratio 20\n"},
		},
		{
			args:   []string{"stat", "--socket", sock, "/"},
			outHas: []string{"cgroup /\nmanaged true\nstate idle\nsince 2026-12-01T17:22:54Z\n", "kswapd_steal 10\n", "pgoutrun 2\n", "reclaimed_bytes 40960\n", "writeback_first true\n", "limit 524288000\n"}, // after --reset,
		},
		{
			args:   []string{"set", "--socket", filepath.Join(t.TempDir(), "none.sock"), "/", "dirty_ratio=15"},
			errHas: []string{"daemon not running", "none.sock"},
		},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			if _, err := memcgdLayout(); err != nil {
				t.Skipf("no memory cgroup mount to resolve / against: %v", err)
			}
			out, err := memcgd(t, tt.args...)
			for _, s := range tt.outHas {
				if !strings.Contains(out, s) {
					t.Errorf("output lacks %q:\n%s", s, out)
				}
			}
			if len(tt.errHas) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want one mentioning %q", tt.errHas)
			}
			for _, s := range tt.errHas {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			var ke *memcg.KnobError
			if got := errors.As(err, &ke); got != tt.knobErr {
				t.Errorf("error %v: *memcg.KnobError %v, want %v", err, got, tt.knobErr)
			}
		})
	}
}

// memcgdLayout resolves "/" as the commands do.
func memcgdLayout() (host.Cgroup, error) {
	return resolveCgroup("/proc", "/")
}
