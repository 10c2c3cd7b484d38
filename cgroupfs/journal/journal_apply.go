package journal

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/format"
	"github.com/memcgd/memcgd/host"
)

// ErrChangedByOther reports that a control file does not hold the value
// memcgd expects: another writer (an operator, a container runtime) set it.
// memcgd then leaves it as they set it: it neither writes over it nor
// "restores" an original that is no longer current (issue 9, defect 8).
var ErrChangedByOther = errors.New("control file changed by another writer")

// errEnded reports a step of a change already undone.
var errEnded = errors.New("change already undone")

// Applied is a change in force, made by Journal.Apply: one journal record,
// any number of writes (Set), one Undo.
//
// Every write is preceded by a read: the file must still hold the value
// memcgd wrote last (or the original, before the first write), else the
// step stops with ErrChangedByOther. Between that read and the write
// another writer's change can still be lost; the window is two system
// calls, which no interface of cgroupfs closes (there is no compare and
// swap on a control file).
//
// An Applied is not safe for concurrent use.
type Applied struct {
	j        *Journal
	id       uint64
	path     string
	original string
	last     string // the value memcgd last wrote, the original before the first write
	ended    bool
}

// Apply is the one way memcgd changes a control file, so that the rule
// "journal, then write, then undo" lives in one place. It reads the file's
// current value (the original) and lets accept refuse it; records the
// change (written, not synced: see Journal) with the cgroup's identity and lowest, the value Recover
// treats as memcgd's (value itself, or for a limit that steps down, the
// lowest it will write); reads the file again, since a change that slipped
// in between would make the original wrong; and writes value. It returns
// the change in force; Undo puts the original back. If the write fails,
// the change is undone before apply returns the error.
func (j *Journal) Apply(ctx context.Context, p, value, lowest string, accept func(original string) error) (*Applied, error) {
	original, err := ctlfile.Read(p)
	if err != nil {
		return nil, err
	}
	if accept != nil {
		if err := accept(original); err != nil {
			return nil, err
		}
	}
	ino, err := ctlfile.FileIno(p)
	if err != nil {
		return nil, err
	}
	id, err := j.Record(Change{Path: p, Original: original, Wrote: lowest, Cgroup: ino})
	if err != nil {
		return nil, err
	}
	a := &Applied{j: j, id: id, path: p, original: original, last: original}
	if err := a.Set(ctx, value); err != nil {
		return nil, errors.Join(err, a.Undo())
	}
	return a, nil
}

// Set writes v, if the file still holds the value memcgd left there.
func (a *Applied) Set(ctx context.Context, v string) error {
	if a.ended {
		return fmt.Errorf("write %q to %s: %w", v, a.path, errEnded)
	}
	cur, err := ctlfile.Read(a.path)
	if err != nil {
		return err
	}
	if !sameValue(a.path, cur, a.last) {
		return fmt.Errorf("%s holds %q, not %q as memcgd left it: %w", a.path, cur, a.last, ErrChangedByOther)
	}
	if err := ctlfile.WriteCtx(ctx, a.path, v); err != nil {
		return err // the kernel refused the value: the file holds a.last still
	}
	a.last = v
	return nil
}

// Undo ends the change: it writes the original back if the file still
// holds the value memcgd wrote last, and marks the record done. A cgroup
// that vanished has nothing to undo. A file another writer changed is left
// as they set it, and undo returns ErrChangedByOther. A failed write keeps
// the record pending, for Recover at shutdown or the next start. Undo
// cannot be cancelled: it runs when the caller's context has ended too.
func (a *Applied) Undo() error {
	if a.ended {
		return nil
	}
	var other error
	cur, err := ctlfile.Read(a.path)
	switch {
	case errors.Is(err, host.ErrVanished):
	case err != nil:
		return err
	case !sameValue(a.path, cur, a.last):
		other = fmt.Errorf("%s holds %q, not %q as memcgd left it; leaving it: %w", a.path, cur, a.last, ErrChangedByOther)
	case !sameValue(a.path, a.last, a.original):
		if err := ctlfile.Write(a.path, a.original); err != nil && !errors.Is(err, host.ErrVanished) {
			return fmt.Errorf("undo: %w", err)
		}
	}
	a.ended = true
	return errors.Join(other, a.j.Done(a.id))
}

// Original is the value the file held before the change, which Undo
// writes back.
func (a *Applied) Original() string { return a.original }

// sameValue reports whether the control file p holding a means it holds b:
// limits are compared in pages, as the kernel keeps them (mm/page_counter.c
// page_counter_memparse rounds a byte limit down to pages); the v1 freezer
// reads FREEZING while the FROZEN it was told takes hold
// (kernel/cgroup/legacy_freezer.c freezer_state_strs).
func sameValue(p, a, b string) bool {
	switch filepath.Base(p) {
	case FileLimitV1, FileHigh, FileMax:
		x, errX := format.ParseLimit([]byte(a))
		y, errY := format.ParseLimit([]byte(b))
		if errX != nil || errY != nil {
			return a == b
		}
		return x/ctlfile.PageSize == y/ctlfile.PageSize
	case FileFreezerV1:
		return frozenV1(a) == frozenV1(b)
	}
	return a == b
}

// frozenV1 maps a v1 freezer.state value to "frozen or freezing".
func frozenV1(s string) string {
	if s == "FREEZING" {
		return FreezerFrozenV1
	}
	return s
}

// heldByUs reports whether the file of change c, holding cur, still
// holds a value memcgd wrote: c.Wrote, or for a limit any value in
// [c.Wrote, c.Original).
func heldByUs(c Change, cur string) (bool, error) {
	switch filepath.Base(c.Path) {
	case FileLimitV1, FileHigh, FileMax:
		now, err := format.ParseLimit([]byte(cur))
		if err != nil {
			return false, fmt.Errorf("read %s: %w", c.Path, err)
		}
		lowest, err := format.ParseLimit([]byte(c.Wrote))
		if err != nil {
			return false, fmt.Errorf("journalled value %q of %s: %w", c.Wrote, c.Path, err)
		}
		orig, err := format.ParseLimit([]byte(c.Original))
		if err != nil {
			return false, fmt.Errorf("journalled original %q of %s: %w", c.Original, c.Path, err)
		}
		return now/ctlfile.PageSize >= lowest/ctlfile.PageSize && now/ctlfile.PageSize < orig/ctlfile.PageSize, nil
	}
	return sameValue(c.Path, cur, c.Wrote), nil
}
