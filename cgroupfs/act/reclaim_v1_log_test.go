package act_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/act"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/journal"
	"github.com/memcgd/memcgd/cgroupfs/layout"
)

// recorder is a slog.Handler that keeps every record.
type recorder struct {
	mu    sync.Mutex
	attrs []slog.Attr
	recs  *[]slog.Record
}

func newRecorder() *recorder { return &recorder{recs: new([]slog.Record)} }

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec = rec.Clone()
	rec.AddAttrs(r.attrs...)
	*r.recs = append(*r.recs, rec)
	return nil
}

func (r *recorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &recorder{attrs: append(append([]slog.Attr{}, r.attrs...), as...), recs: r.recs}
}

func (r *recorder) WithGroup(string) slog.Handler { return r }

// lines returns the messages at info and above, each with its attributes.
func (r *recorder) lines() []map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]string
	for _, rec := range *r.recs {
		if rec.Level < slog.LevelInfo {
			continue
		}
		m := map[string]string{"msg": rec.Message}
		rec.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
		out = append(out, m)
	}
	return out
}

// A v1 squeeze says what it did at info in one line, once the original
// memory.limit_in_bytes is back (the journal record undone), whatever the
// number of steps it took.
func TestSqueezeLogsOneLine(t *testing.T) {
	l := cgrouptest.Layout(t)
	if l.Memory.Version != layout.V1 {
		t.Skip("the limit squeeze is cgroup v1's")
	}
	sz := reclaimSizes(t)
	c := cgrouptest.New(t, l, 0)
	writeSynced(t, c, filepath.Join(cgrouptest.DiskDir(t), "cache"), sz.cache)
	j := cgrouptest.Journal(t, l)
	original := limit(t, l, c)
	before := c.Usage(t)
	rec := newRecorder()
	// More than one ReclaimChunk, so that the squeeze takes several steps.
	ask := min(sz.ask, 3*act.ReclaimChunk)
	got, err := act.Reclaim(context.Background(), l, c.Path, ask, 0, j, slog.New(rec))
	if err != nil {
		t.Fatalf("Reclaim(%d MiB): %v", ask/mib, err)
	}
	lines := rec.lines()
	t.Logf("Reclaim(%d MiB) = %d MiB; info lines: %v", ask/mib, got/mib, lines)
	if len(lines) != 1 {
		t.Fatalf("info lines = %v, want one: v1 limit lowered and restored", lines)
	}
	line := lines[0]
	file := filepath.Join(c.Dir, journal.FileLimitV1)
	if line["msg"] != "v1 limit lowered and restored" || line["cgroup"] != string(c.Path) || line["file"] != file || line["limit"] != original {
		t.Errorf("line = %v, want v1 limit lowered and restored, cgroup=%s file=%s limit=%s", line, c.Path, file, original)
	}
	// The floor is what usage was less what was asked, in pages.
	floor, err := strconv.ParseUint(line["floor"], 10, 64)
	if want := (before - ask + 4095) &^ 4095; err != nil || floor > before || before-floor > ask+4096 {
		t.Errorf("floor=%s, want about %d: usage %d less the %d asked", line["floor"], want, before, ask)
	}
	if a, err := strconv.ParseUint(line["asked_bytes"], 10, 64); err != nil || a == 0 || a > ask {
		t.Errorf("asked_bytes=%s, want 1 to %d", line["asked_bytes"], ask)
	}
	if now := limit(t, l, c); now != original {
		t.Errorf("limit after Reclaim = %s, want %s", now, original)
	}
}
