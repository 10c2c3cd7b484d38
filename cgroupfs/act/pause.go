package act

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/format"
	"github.com/memcgd/memcgd/cgroupfs/journal"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
	"golang.org/x/sys/unix"
)

// MaxPause is the longest Pause stops a cgroup: the kernel's own longest
// dirty-throttling sleep (mm/page-writeback.c MAX_PAUSE, HZ/5).
const MaxPause = 200 * time.Millisecond

// freezeWait bounds how long Pause waits for the kernel to report the
// cgroup frozen. The v2 freezer stops a task on its way back to user space
// (kernel/cgroup/freezer.c cgroup_enter_frozen); one sleeping in the
// kernel, in balance_dirty_pages for instance, is stopped only when that
// sleep ends, which MaxPause also bounds.
const freezeWait = MaxPause

// freezePoll is how often Pause reads the freezer state while it waits.
const freezePoll = time.Millisecond

// freezer is the control file that stops a cgroup's tasks, in either
// flavour.
type freezer struct {
	file           string // cgroup.freeze or freezer.state
	freeze, thaw   string // the values to write
	frozen         func() (bool, error)
	dir, hierarchy string // for messages
}

// ErrFrozenByOther reports that a cgroup is frozen already, by someone
// other than memcgd: that freeze is theirs to end, and memcgd neither
// freezes nor thaws the cgroup.
var ErrFrozenByOther = errors.New("frozen by someone else")

// Frozen is one throttle episode of a cgroup: frozen by Freeze, then
// thawed and frozen again any number of times (Thaw, Refreeze) at the
// cost of one write each, and ended by End, which leaves it thawed. The
// journal holds one record for the whole episode, written by Freeze:
// a crash at any point is undone by the next run's Recover, which thaws
// the cgroup if it is still frozen with memcgd's freeze.
//
// Each step first reads the freezer file and stops with journal.ErrChangedByOther
// if it does not hold what memcgd wrote last: a user who thawed the cgroup
// meanwhile keeps it thawed, and memcgd does not freeze it again in this
// episode. A user who freezes the cgroup while memcgd's own freeze is in
// force cannot be told apart: cgroup.freeze (and v1 freezer.state) then
// holds the same value memcgd wrote, with no record of who wrote it, and
// the episode's next Thaw or End thaws it. That window is at most the
// episode's frozen time (MaxPause a pause); to keep a cgroup frozen for
// good, freeze its parent, whose freeze memcgd never touches and which
// keeps the children frozen whatever their own setting
// (kernel/cgroup/freezer.c cgroup_freeze_task; legacy_freezer.c
// PARENT_FREEZING).
//
// A Frozen is safe for concurrent use: the end of the episode's context
// calls End from another goroutine.
type Frozen struct {
	cg   host.Cgroup
	fz   freezer
	ctx  context.Context
	stop func() bool // ends the context watch

	mu sync.Mutex // guards a
	a  *journal.Applied
}

// Freeze starts a throttle episode: it records the freeze in j (one
// record, written, not synced: see Journal) and freezes cg, preferring the cgroup v2 freezer (cgroup.freeze
// of the cgroup, on a hybrid host of the unified cgroup at the same path)
// over the v1 freezer hierarchy (freezer.state). If neither has the
// cgroup, the error wraps errors.ErrUnsupported; if the cgroup is frozen
// already, by someone else, it wraps ErrFrozenByOther. Freeze does not
// wait for the tasks to stop: see Settle.
//
// When ctx ends, the episode ends (End) at once, from another goroutine:
// the cgroup is never left frozen past its caller.
func Freeze(ctx context.Context, l layout.Layout, cg host.Cgroup, j *journal.Journal) (*Frozen, error) {
	return FreezeMirrored(ctx, l, "", cg, j, nil)
}

// FreezeMirrored is Freeze; with a procRoot, a v1 memory cgroup that only
// the v1 freezer can hold gets its freezer cgroup made and its tasks
// swept into it first (EnsureFreezer; docs/freezer.md), and made receives
// the directories created, also when it fails. Where that cannot work the
// error is a *ThrottleUnavailable.
func FreezeMirrored(ctx context.Context, l layout.Layout, procRoot string, cg host.Cgroup, j *journal.Journal, made *[]string) (*Frozen, error) {
	if j == nil {
		return nil, fmt.Errorf("freeze %s: a freeze needs a journal; got nil", cg)
	}
	fz, err := freezerOf(l, procRoot, cg, made)
	if err != nil {
		return nil, fmt.Errorf("freeze %s: %w", cg, err)
	}
	a, err := j.Apply(ctx, fz.file, fz.freeze, fz.freeze, func(original string) error {
		if original != fz.thaw {
			return fmt.Errorf("%s holds %q: %w", fz.file, original, ErrFrozenByOther)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("freeze %s (%s %s): %w", cg, fz.hierarchy, fz.dir, err)
	}
	f := &Frozen{cg: cg, fz: fz, ctx: ctx, a: a}
	f.stop = context.AfterFunc(ctx, func() { _ = f.End() })
	return f, nil
}

// Thaw lets the cgroup's tasks run again, within the episode: no journal
// write, no fsync.
func (f *Frozen) Thaw() error {
	return f.step(context.Background(), f.fz.thaw, "thaw")
}

// Refreeze stops the cgroup's tasks again, within the episode: no journal
// write, no fsync. It fails once the episode's context has ended.
func (f *Frozen) Refreeze() error {
	return f.step(f.ctx, f.fz.freeze, "refreeze")
}

func (f *Frozen) step(ctx context.Context, v, what string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.a.Set(ctx, v); err != nil {
		return fmt.Errorf("%s %s (%s %s): %w", what, f.cg, f.fz.hierarchy, f.fz.dir, err)
	}
	return nil
}

// Settle waits until the kernel reports every task of the cgroup stopped,
// at most freezeWait, and reports whether they stopped. The v2 freezer
// stops a task on its way back to user space (kernel/cgroup/freezer.c
// cgroup_enter_frozen); one sleeping in the kernel, in balance_dirty_pages
// for instance, is stopped only when that sleep ends, which MaxPause also
// bounds.
func (f *Frozen) Settle(ctx context.Context) (bool, error) {
	for deadline := time.Now().Add(freezeWait); ; {
		ok, err := f.fz.frozen()
		if err != nil || ok || time.Now().After(deadline) {
			return ok, err
		}
		if err := sleep(ctx, freezePoll); err != nil {
			return false, err
		}
	}
}

// End ends the episode: it thaws the cgroup if memcgd's freeze is still in
// force, and marks the journal record done (unsynced). It may be called
// more than once; calls after the first do nothing. The thaw is not
// cancelled with the episode's context.
func (f *Frozen) End() error {
	f.stop()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.a.Undo(); err != nil {
		return fmt.Errorf("end freeze of %s (%s %s): %w", f.cg, f.fz.hierarchy, f.fz.dir, err)
	}
	return nil
}

// Pause stops cg's tasks for d, at most MaxPause, and resumes them: one
// throttle episode (Freeze, Settle, End). The pause counts from the moment
// the freeze took hold, or from freezeWait after the freeze if it has not
// by then. A cgroup already frozen by someone else is left alone (no
// error). Pause thaws even when ctx is cancelled during the pause, and
// then returns ctx's error.
func Pause(ctx context.Context, l layout.Layout, cg host.Cgroup, d time.Duration, j *journal.Journal) error {
	return PauseMirrored(ctx, l, "", cg, d, j, nil)
}

// PauseMirrored is Pause through FreezeMirrored, with its procRoot and
// made.
func PauseMirrored(ctx context.Context, l layout.Layout, procRoot string, cg host.Cgroup, d time.Duration, j *journal.Journal, made *[]string) error {
	if d < 0 {
		return fmt.Errorf("pause %s: duration %v: want 0 or more (at most %v)", cg, d, MaxPause)
	}
	if j == nil {
		return fmt.Errorf("pause %s: a freeze needs a journal; got nil", cg)
	}
	d = min(d, MaxPause)
	if d == 0 {
		return nil
	}
	f, err := FreezeMirrored(ctx, l, procRoot, cg, j, made)
	if errors.Is(err, ErrFrozenByOther) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pause: %w", err)
	}
	_, err = f.Settle(ctx)
	if err == nil {
		err = sleep(ctx, d)
	}
	if eerr := f.End(); eerr != nil {
		err = errors.Join(err, eerr)
	}
	if err != nil {
		return fmt.Errorf("pause %s: %w", cg, err)
	}
	return nil
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// freezerOf finds the freezer that holds cg: the v2 one at
// l.UnifiedDir(cg), else the v1 one at l.FreezerDir(cg). On a hybrid host a
// cgroup at the same path in another hierarchy is only used if it holds no
// task outside the memory cgroup, so a pause never stops an unrelated
// task.
//
// With a procRoot, on a v1 memory hierarchy with a v1 freezer hierarchy
// and no unified cgroup.freeze, EnsureFreezer runs first, before every
// freeze (the re-sweep of tasks that joined since), and its
// *ThrottleUnavailable is returned as is; made receives the directories
// it created. Without a freezer at all the error is a *ThrottleUnavailable.
func freezerOf(l layout.Layout, procRoot string, cg host.Cgroup, made *[]string) (freezer, error) {
	memDir := l.Memory.Dir(cg)
	var tried []string
	if dir, ok := l.UnifiedDir(cg); ok {
		file := filepath.Join(dir, journal.FileFreeze)
		fz := freezer{file: file, freeze: "1", thaw: "0", dir: dir, hierarchy: "cgroup v2",
			frozen: func() (bool, error) { return frozenV2(dir) }}
		if hasFreeze(dir) {
			return fz, sameTasks(dir, memDir)
		}
		tried = append(tried, file)
	}
	if procRoot != "" && l.Memory.Version == layout.V1 {
		m, err := EnsureFreezer(l, procRoot, cg)
		if made != nil {
			*made = append(*made, m.Made...)
		}
		if err != nil {
			return freezer{}, err
		}
	}
	if dir, ok := l.FreezerDir(cg); ok {
		file := filepath.Join(dir, journal.FileFreezerV1)
		fz := freezer{file: file, freeze: journal.FreezerFrozenV1, thaw: journal.FreezerThawedV1, dir: dir, hierarchy: "cgroup v1 freezer",
			frozen: func() (bool, error) {
				s, err := ctlfile.Read(file)
				return s == journal.FreezerFrozenV1, err
			}}
		if _, err := os.Stat(file); err == nil {
			return fz, sameTasks(dir, memDir)
		}
		tried = append(tried, file)
	}
	if len(tried) == 0 && procRoot != "" {
		return freezer{}, &ThrottleUnavailable{Cgroup: cg, Reason: "no cgroup.freeze at this path in a unified hierarchy, and no v1 freezer hierarchy is mounted"}
	}
	if len(tried) == 0 {
		return freezer{}, fmt.Errorf("no freezer has the cgroup (no cgroup.freeze in a unified hierarchy, "+
			"no freezer.state in a v1 freezer hierarchy): %w", errors.ErrUnsupported)
	}
	return freezer{}, fmt.Errorf("no freezer file among %s: %w", strings.Join(tried, ", "), errors.ErrUnsupported)
}

// hasFreeze reports whether the unified-hierarchy cgroup at dir has a
// cgroup.freeze: the root cgroup has none.
func hasFreeze(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, journal.FileFreeze))
	return err == nil
}

// frozenV2 reads the "frozen" key of dir/cgroup.events, which turns 1 once
// every task of the cgroup and its descendants has stopped
// (kernel/cgroup/freezer.c cgroup_update_frozen).
func frozenV2(dir string) (bool, error) {
	p := filepath.Join(dir, "cgroup.events")
	s, err := ctlfile.Read(p)
	if err != nil {
		return false, err
	}
	var e format.CgroupEvents
	if err := format.ParseCgroupEvents([]byte(s), &e); err != nil {
		return false, fmt.Errorf("read %s: %w", p, err)
	}
	if !e.HasFrozen {
		return false, fmt.Errorf("read %s: no frozen key", p)
	}
	return e.Frozen == 1, nil
}

// sameTasks checks that the freezer cgroup at dir holds no live task
// outside the memory cgroup at memDir (both with their descendants). The
// freezer is read first, so that a task forked in between shows in the
// memory cgroup.
func sameTasks(dir, memDir string) error {
	if dir == memDir {
		return nil
	}
	held, err := subtreeProcs(dir)
	if err != nil {
		return err
	}
	mem, err := subtreeProcs(memDir)
	if err != nil {
		return err
	}
	in := make(map[int]bool, len(mem))
	for _, pid := range mem {
		in[pid] = true
	}
	for _, pid := range held {
		if in[pid] {
			continue
		}
		if unix.Kill(pid, 0) == unix.ESRCH {
			continue // exited between the two reads
		}
		return fmt.Errorf("freezer cgroup %s holds task %d, which is not in memory cgroup %s; refusing to freeze it", dir, pid, memDir)
	}
	return nil
}
