package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memcgd/memcgd/control"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/overrides"
)

// In batch mode top prints -n refreshes one after the other, each a
// header and a row per managed cgroup, with no terminal control; with no
// daemon it fails in one line, and a wrong flag is a usage error.
func TestTopBatch(t *testing.T) {
	ov, err := overrides.Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	d := &fakeDaemon{overrides: ov, stat: memcg.Stat{Usage: 300 << 20, Limit: 500 << 20, Dirty: 5 << 20, Writeback: 1 << 20}}
	sock := filepath.Join(t.TempDir(), "control.sock")
	ln, err := control.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&control.Server{Backend: d}).Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()

	out, err := memcgd(t, "top", "-b", "-n", "2", "-d", "10ms", "--socket", sock)
	if err != nil {
		t.Fatalf("memcgd top -b -n 2: %v\n%s", err, out)
	}
	// Each refresh begins with its header line.
	frames := strings.Split(out, "memcgd top   dirty tracking: ")[1:]
	if len(frames) != 2 || strings.Contains(out, "\x1b") {
		t.Fatalf("top -b -n 2 printed %d refreshes (want 2, no escape sequences):\n%q", len(frames), out)
	}
	for i, f := range frames {
		lines := strings.Split(strings.TrimRight(f, "\n"), "\n")
		// "/" is the fake's one managed cgroup, idle, with 6.0M dirty
		// plus writeback; the second refresh counts its paces and
		// freezes since the first: none.
		counts := "-       -"
		if i == 1 {
			counts = "0       0"
		}
		if len(lines) != 4 || !strings.HasPrefix(lines[3], "/ ") || !strings.Contains(lines[3], " idle ") ||
			!strings.Contains(lines[3], " 6.0M/") || !strings.HasSuffix(lines[3], counts) {
			t.Errorf("refresh %d: want the header, a blank line, the titles and a row for /, idle, 6.0M dirty+writeback, %q:\n%s", i, counts, f)
		}
	}

	for _, tt := range []struct {
		args []string
		code int
		has  string
	}{
		{[]string{"top", "-b", "--socket", filepath.Join(t.TempDir(), "none.sock")}, exitFailure, "daemon not running"},
		{[]string{"top", "-d", "0s"}, exitUsage, "-d/--delay"},
		{[]string{"top", "-n", "-1"}, exitUsage, "-n/--iterations"},
	} {
		var stdout, stderr strings.Builder
		code := execute(context.Background(), tt.args, &stdout, &stderr)
		if code != tt.code || !strings.Contains(stderr.String(), tt.has) || !strings.HasPrefix(stderr.String(), "memcgd: ") {
			t.Errorf("memcgd %v: exit %d, stderr %q; want exit %d and %q", tt.args, code, stderr.String(), tt.code, tt.has)
		}
	}
}
