package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/memcgd/memcgd/control"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// topRow is what `memcgd top` shows of one managed cgroup, read off the
// daemon's report by field name (state.Status.Fields).
type topRow struct {
	cgroup host.Cgroup
	state  string
	since  time.Time
	// dirty is dirty plus writeback, thresh the dirty limit it is held
	// to (dirty_thresh).
	dirty, thresh uint64
	// rate is the dirtying rate and bw the write bandwidth, in bytes per
	// second.
	rate, bw     uint64
	usage, limit uint64
	// paces and freezes are the daemon's counts since it found the
	// cgroup (throttle_paces, throttle_pauses).
	paces, freezes uint64
	// tracker says the eBPF dirty tracker wakes the daemon for it, known
	// whether that is known.
	tracker, trackerKnown bool
	dryRun                bool
}

// newTopRow reads r's row.
func newTopRow(r control.Report) topRow {
	row := topRow{cgroup: r.Cgroup, state: r.State, since: r.Since, dryRun: r.DryRun, limit: memcg.NoLimit, thresh: memcg.NoLimit}
	for _, f := range r.Fields {
		if !f.Known {
			continue
		}
		switch f.Name {
		case "dirty", "writeback":
			row.dirty += f.Value
		case "dirty_thresh":
			row.thresh = f.Value
		case "dirty_rate_bytes_per_second":
			row.rate = f.Value
		case "write_bandwidth_bytes_per_second":
			row.bw = f.Value
		case "usage":
			row.usage = f.Value
		case "limit":
			row.limit = f.Value
		case "throttle_paces":
			row.paces = f.Value
		case "throttle_pauses":
			row.freezes = f.Value
		case "dirty_tracker":
			row.tracker, row.trackerKnown = f.Value != 0, true
		}
	}
	return row
}

// topColumns are the table's columns after CGROUP, each right-aligned
// in its width, but STATE, left-aligned.
var topColumns = []struct {
	name  string
	width int
}{
	{"STATE", 14}, {"DIRTY+WB/LIMIT", 15}, {"DIRTYING", 9}, {"WRITING", 9}, {"USAGE/LIMIT", 15}, {"PACES", 5}, {"FREEZES", 7},
}

// minCgroupWidth is the least the CGROUP column gets, however narrow the
// terminal: a table wider than the terminal is cut at its right edge.
const minCgroupWidth = 16

// renderTop is `memcgd top`'s screen: a header line, a blank line, the
// column titles and one row per managed cgroup of cur, sorted by dirtying
// rate, then by dirty+writeback, then by path. prev is the previous
// refresh's reports, whose counters the PACES and FREEZES columns count
// from ("-" for a cgroup it lacks, as at the first refresh); now is when
// cur was read, for the time in each state. No line is wider than width,
// unless width is 0 (batch mode: no limit).
func renderTop(cur, prev []control.Report, now time.Time, width int) []string {
	before := make(map[host.Cgroup]topRow, len(prev))
	for _, r := range prev {
		if r.Managed {
			before[r.Cgroup] = newTopRow(r)
		}
	}
	var rows []topRow
	for _, r := range cur {
		if r.Managed {
			rows = append(rows, newTopRow(r))
		}
	}
	slices.SortFunc(rows, func(a, b topRow) int {
		return cmp.Or(cmp.Compare(b.rate, a.rate), cmp.Compare(b.dirty, a.dirty), strings.Compare(string(a.cgroup), string(b.cgroup)))
	})

	lines := []string{topHeader(rows, len(cur)), ""}
	cgWidth := len("CGROUP")
	for _, r := range rows {
		cgWidth = max(cgWidth, len(r.cgroup))
	}
	if width > 0 {
		rest := 0
		for _, c := range topColumns {
			rest += 1 + c.width
		}
		cgWidth = min(cgWidth, max(width-rest, minCgroupWidth))
	}
	cells := make([]string, len(topColumns))
	for i, c := range topColumns {
		cells[i] = c.name
	}
	lines = append(lines, topLine(cgWidth, "CGROUP", cells))
	for _, r := range rows {
		paces, freezes := "-", "-"
		if p, ok := before[r.cgroup]; ok {
			paces, freezes = fmt.Sprint(r.paces-min(p.paces, r.paces)), fmt.Sprint(r.freezes-min(p.freezes, r.freezes))
		}
		st := "-"
		if r.state != "" {
			st = r.state
			if !r.since.IsZero() {
				st += " " + shortDuration(now.Sub(r.since))
			}
		}
		lines = append(lines, topLine(cgWidth, ellipsizeLeft(string(r.cgroup), cgWidth), []string{
			st, sizeOf(r.dirty) + "/" + sizeOf(r.thresh), sizeOf(r.rate) + "/s", sizeOf(r.bw) + "/s",
			sizeOf(r.usage) + "/" + sizeOf(r.limit), paces, freezes,
		}))
	}
	if len(rows) == 0 {
		lines = append(lines, "(no managed cgroup)")
	}
	if width > 0 {
		for i, l := range lines {
			if len(l) > width {
				lines[i] = l[:width]
			}
		}
	}
	return lines
}

// topHeader says what the daemon runs with: its dirty-tracking path, as
// its reports say, and whether it runs dry; then how many cgroups it
// reports and how many it manages.
func topHeader(rows []topRow, reported int) string {
	path, dry := "n/a", false
	for _, r := range rows {
		if r.trackerKnown {
			path = "poll"
			if r.tracker {
				path = "tracker"
			}
		}
		dry = dry || r.dryRun
	}
	h := fmt.Sprintf("memcgd top   dirty tracking: %s   dry run: %t   cgroups: %d managed of %d", path, dry, len(rows), reported)
	if dry {
		h += "   (nothing is changed: what it would do)"
	}
	return h
}

// topLine lays out one line of the table.
func topLine(cgWidth int, cg string, cells []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s", cgWidth, cg)
	for i, c := range topColumns {
		if i == 0 {
			fmt.Fprintf(&b, " %-*s", c.width, cells[i])
		} else {
			fmt.Fprintf(&b, " %*s", c.width, cells[i])
		}
	}
	return strings.TrimRight(b.String(), " ")
}

// ellipsizeLeft cuts s to n bytes, keeping its end (a cgroup's leaf says
// most), with "..." where it cut.
func ellipsizeLeft(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 3 {
		return s[len(s)-n:]
	}
	return "..." + s[len(s)-(n-3):]
}

// sizeOf is a size in bytes in binary units, as systemd-cgtop prints
// one: 512B, 4.0K, 16.0M, 1.5G; max for no limit.
func sizeOf(v uint64) string {
	if v == memcg.NoLimit {
		return "max"
	}
	const units = "KMGTPE"
	if v < 1024 {
		return fmt.Sprintf("%dB", v)
	}
	f, i := float64(v)/1024, 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	return fmt.Sprintf("%.1f%c", f, units[i])
}

// shortDuration is d in its two largest units: 850ms, 12s, 3m05s, 2h01m,
// 3d04h.
func shortDuration(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d/time.Millisecond)
	case d < time.Minute:
		return fmt.Sprintf("%ds", d/time.Second)
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", d/time.Minute, d%time.Minute/time.Second)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", d/time.Hour, d%time.Hour/time.Minute)
	}
	return fmt.Sprintf("%dd%02dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
}
