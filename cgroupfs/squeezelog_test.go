package cgroupfs

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/memcgd/memcgd/host"
)

// A cgroup's squeezes log at info at most once a squeezeLogEvery, the
// first at once, each later info line with the count of squeezes logged at
// debug since the one before; another cgroup has its own tally, and a
// forgotten cgroup starts afresh. Warnings stay warnings.
func TestSqueezeLogSpacesOutInfoLines(t *testing.T) {
	const a, b = host.Cgroup("/a"), host.Cgroup("/b")
	t0 := time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)
	type squeeze struct {
		cg     host.Cgroup
		at     time.Duration // since t0
		forget bool          // forget cg before the squeeze
		level  string        // of the squeeze's line
		quiet  float64       // squeezes_at_debug_since; -1: absent
	}
	steps := []squeeze{
		{cg: a, at: 0, level: "INFO", quiet: -1},
		{cg: a, at: time.Millisecond, level: "DEBUG", quiet: -1},
		{cg: b, at: 2 * time.Millisecond, level: "INFO", quiet: -1},
		{cg: a, at: 30 * time.Second, level: "DEBUG", quiet: -1},
		{cg: a, at: squeezeLogEvery, level: "INFO", quiet: 2},
		{cg: a, at: squeezeLogEvery + time.Second, level: "DEBUG", quiet: -1},
		{cg: b, at: 3 * squeezeLogEvery, level: "INFO", quiet: 0},
		{cg: a, at: 3 * squeezeLogEvery, forget: true, level: "INFO", quiet: -1},
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var q squeezeLog
	for i, s := range steps {
		if s.forget {
			q.forget(s.cg)
		}
		buf.Reset()
		q.logger(log, s.cg, t0.Add(s.at)).Info("v1 limit lowered and restored", "cgroup", s.cg)
		var line map[string]any
		if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
			t.Fatalf("squeeze %d: %q: %v", i, buf.String(), err)
		}
		quiet, ok := line["squeezes_at_debug_since"].(float64)
		if !ok {
			quiet = -1
		}
		if line["level"] != s.level || quiet != s.quiet {
			t.Errorf("squeeze %d (%s at %v): level %v, squeezes_at_debug_since %v; want %s, %v",
				i, s.cg, s.at, line["level"], quiet, s.level, s.quiet)
		}
	}

	buf.Reset()
	q.logger(log, a, t0.Add(3*squeezeLogEvery+time.Millisecond)).Warn("restore failed")
	if !strings.Contains(buf.String(), `"level":"WARN"`) {
		t.Errorf("a warning between info lines logged as %q; want it at WARN", buf.String())
	}
	buf.Reset()
	atInfo := slog.New(slog.NewJSONHandler(&buf, nil))
	q.logger(atInfo, a, t0.Add(3*squeezeLogEvery+2*time.Millisecond)).Info("v1 limit lowered and restored")
	if buf.Len() > 0 {
		t.Errorf("a squeeze between info lines wrote %q to a log at info; want nothing", buf.String())
	}
	if q.logger(nil, a, t0) != nil {
		t.Error("logger(nil) is not nil: act.Reclaim takes nil to discard")
	}
}
