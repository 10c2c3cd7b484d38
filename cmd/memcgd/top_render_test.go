package main

import (
	"strings"
	"testing"
	"time"

	"github.com/memcgd/memcgd/control"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/state"
)

// topStatus is a managed cgroup's status as the daemon reports it.
type topStatus struct {
	cg                     host.Cgroup
	st                     string
	since                  time.Duration // before now
	dirty, wb, limit, use  uint64
	rate, bw               uint64
	paces, freezes         uint64
	unmanaged, dry, poller bool
}

var topNow = time.Date(2026, 12, 1, 17, 22, 54, 0, time.UTC)

func (s topStatus) report() control.Report {
	st := state.Status{
		Cgroup: s.cg, Managed: !s.unmanaged, State: s.st, DryRun: s.dry,
		Stat:           memcg.Stat{Dirty: s.dirty, Writeback: s.wb, Usage: s.use, Limit: s.limit},
		Effective:      memcg.Effective{Dirty: memcg.DirtyLimits{Background: 8 << 20, Limit: 16 << 20}},
		Counters:       state.Counters{Paces: s.paces, Pauses: s.freezes},
		DirtyRate:      s.rate,
		WriteBandwidth: s.bw,
		DirtyTracking:  state.TrackingTracker,
	}
	if s.poller {
		st.DirtyTracking = state.TrackingPoll
	}
	if s.st != "" {
		st.Since = topNow.Add(-s.since)
	}
	if s.unmanaged {
		st.Unmanaged = "it has no memory limit"
	}
	return control.NewReport(st)
}

func reports(ss ...topStatus) []control.Report {
	var out []control.Report
	for _, s := range ss {
		out = append(out, s.report())
	}
	return out
}

func TestRenderTop(t *testing.T) {
	const mib = 1 << 20
	writer := topStatus{cg: "/k/writer", st: state.StatePaced, since: 12 * time.Second,
		dirty: 12 * mib, wb: 2 * mib, use: 90 * mib, limit: 100 * mib, rate: 300 * mib, bw: 80 * mib, paces: 5, freezes: 2}
	idle := topStatus{cg: "/k/idle", st: state.StateIdle, since: 3*time.Minute + 5*time.Second, use: 10 * mib, limit: memcg.NoLimit}
	dirtier := topStatus{cg: "/k/dirtier", st: state.StateActive, since: 850 * time.Millisecond, dirty: 9 * mib, use: 50 * mib, limit: 1 << 30}
	root := topStatus{cg: "/", unmanaged: true, rate: 900 * mib}
	header := "memcgd top   dirty tracking: tracker   dry run: false   cgroups: 3 managed of 4"
	titles := "CGROUP     STATE           DIRTY+WB/LIMIT  DIRTYING   WRITING     USAGE/LIMIT PACES FREEZES"
	tests := []struct {
		name       string
		cur, prev  []control.Report
		width      int
		want       []string
		wantPrefix bool // want holds the first lines only
	}{
		{
			name: "first refresh: sorted by dirtying rate, then dirty+writeback; the unmanaged left out; no counts yet",
			cur:  reports(idle, dirtier, root, writer),
			want: []string{
				header, "", titles,
				"/k/writer  paced 12s          14.0M/16.0M  300.0M/s   80.0M/s    90.0M/100.0M     -       -",
				"/k/dirtier active 850ms        9.0M/16.0M      0B/s      0B/s      50.0M/1.0G     -       -",
				"/k/idle    idle 3m05s            0B/16.0M      0B/s      0B/s       10.0M/max     -       -",
			},
		},
		{
			name: "the counts are since the previous refresh; a cgroup new since has none",
			cur:  reports(writer, func() topStatus { s := idle; s.paces, s.freezes = 1, 1; return s }()),
			prev: reports(func() topStatus { s := writer; s.paces, s.freezes = 2, 2; return s }()),
			want: []string{
				"memcgd top   dirty tracking: tracker   dry run: false   cgroups: 2 managed of 2", "",
				"CGROUP    STATE           DIRTY+WB/LIMIT  DIRTYING   WRITING     USAGE/LIMIT PACES FREEZES",
				"/k/writer paced 12s          14.0M/16.0M  300.0M/s   80.0M/s    90.0M/100.0M     3       0",
				"/k/idle   idle 3m05s            0B/16.0M      0B/s      0B/s       10.0M/max     -       -",
			},
		},
		{
			name: "dry run and the poll path in the header",
			cur:  reports(func() topStatus { s := idle; s.dry, s.poller = true, true; return s }()),
			want: []string{
				"memcgd top   dirty tracking: poll   dry run: true   cgroups: 1 managed of 1   (nothing is changed: what it would do)",
			},
			wantPrefix: true,
		},
		{
			name: "no managed cgroup",
			cur:  reports(root),
			want: []string{
				"memcgd top   dirty tracking: n/a   dry run: false   cgroups: 0 managed of 1", "",
				"CGROUP STATE           DIRTY+WB/LIMIT  DIRTYING   WRITING     USAGE/LIMIT PACES FREEZES",
				"(no managed cgroup)",
			},
		},
		{
			name:  "narrow: the cgroup's path cut at its start, every line at the width",
			cur:   reports(topStatus{cg: "/kubepods/burstable/pod-0123456789abcdef/ctr", st: state.StateFrozen, since: 2 * time.Hour, limit: memcg.NoLimit}),
			width: 98,
			want: []string{
				"memcgd top   dirty tracking: tracker   dry run: false   cgroups: 1 managed of 1", "",
				// The CGROUP column gets what the other columns (81
				// bytes) leave of 98.
				"CGROUP            STATE           DIRTY+WB/LIMIT  DIRTYING   WRITING     USAGE/LIMIT PACES FREEZES",
				"...6789abcdef/ctr frozen 2h00m          0B/16.0M      0B/s      0B/s          0B/max     -       -",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := renderTop(tt.cur, tt.prev, topNow, tt.width)
			if tt.wantPrefix && len(got) > len(tt.want) {
				got = got[:len(tt.want)]
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			for _, l := range got {
				if tt.width > 0 && len(l) > tt.width {
					t.Errorf("line of %d bytes, wider than %d: %q", len(l), tt.width, l)
				}
			}
		})
	}
}

func TestSizeOfAndShortDuration(t *testing.T) {
	sizes := map[uint64]string{0: "0B", 1023: "1023B", 1024: "1.0K", 1536: "1.5K", 16 << 20: "16.0M", 3 << 29: "1.5G", memcg.NoLimit: "max"}
	for v, want := range sizes {
		if got := sizeOf(v); got != want {
			t.Errorf("sizeOf(%d) = %q, want %q", v, got, want)
		}
	}
	durations := map[time.Duration]string{
		-time.Second: "0ms", 850 * time.Millisecond: "850ms", 59 * time.Second: "59s", 185 * time.Second: "3m05s",
		2*time.Hour + 61*time.Second: "2h01m", 76 * time.Hour: "3d04h",
	}
	for d, want := range durations {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
