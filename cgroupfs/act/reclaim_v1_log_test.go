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

// A v1 squeeze says what it did at info: one line when it lowers
// memory.limit_in_bytes (the journal record made), one when it puts the
// original back (the record undone), whatever the number of steps between.
func TestSqueezeLogsLoweredAndRestored(t *testing.T) {
	l := cgrouptest.Layout(t)
	if l.Memory.Version != layout.V1 {
		t.Skip("the limit squeeze is cgroup v1's")
	}
	sz := reclaimSizes(t)
	c := cgrouptest.New(t, l, 0)
	writeSynced(t, c, filepath.Join(cgrouptest.DiskDir(t), "cache"), sz.cache)
	j := cgrouptest.Journal(t, l)
	original := limit(t, l, c)
	rec := newRecorder()
	// More than one ReclaimChunk, so that the squeeze takes several steps.
	ask := min(sz.ask, 3*act.ReclaimChunk)
	got, err := act.Reclaim(context.Background(), l, c.Path, ask, j, slog.New(rec))
	if err != nil {
		t.Fatalf("Reclaim(%d MiB): %v", ask/mib, err)
	}
	lines := rec.lines()
	t.Logf("Reclaim(%d MiB) = %d MiB; info lines: %v", ask/mib, got/mib, lines)
	if len(lines) != 2 {
		t.Fatalf("info lines = %v, want two: v1 limit lowered, v1 limit restored", lines)
	}
	file := filepath.Join(c.Dir, journal.FileLimitV1)
	low, restored := lines[0], lines[1]
	if low["msg"] != "v1 limit lowered" || low["cgroup"] != string(c.Path) || low["file"] != file || low["from"] != original {
		t.Errorf("first line = %v, want v1 limit lowered, cgroup=%s file=%s from=%s", low, c.Path, file, original)
	}
	to, err := strconv.ParseUint(low["to"], 10, 64)
	if origN, perr := strconv.ParseUint(original, 10, 64); err != nil || perr != nil || to >= origN {
		t.Errorf("first line: to=%s, want a limit below the original %s", low["to"], original)
	}
	if restored["msg"] != "v1 limit restored" || restored["cgroup"] != string(c.Path) || restored["to"] != original {
		t.Errorf("second line = %v, want v1 limit restored, cgroup=%s to=%s", restored, c.Path, original)
	}
	if a, err := strconv.ParseUint(restored["asked_bytes"], 10, 64); err != nil || a == 0 || a > ask {
		t.Errorf("second line: asked_bytes=%s, want 1 to %d", restored["asked_bytes"], ask)
	}
	if now := limit(t, l, c); now != original {
		t.Errorf("limit after Reclaim = %s, want %s", now, original)
	}
}
