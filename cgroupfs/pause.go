package cgroupfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

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

// Pause stops cg's tasks for d, at most MaxPause, and resumes them. It
// prefers the cgroup v2 freezer (cgroup.freeze of the cgroup, on a hybrid
// host of the unified cgroup at the same path) and falls back to the v1
// freezer hierarchy (freezer.state). If neither has the cgroup, the error
// wraps errors.ErrUnsupported.
//
// The freeze is recorded in j before it is made, so a crash cannot leave
// the cgroup frozen: the next run's Recover thaws it. Pause thaws even when
// ctx is cancelled during the pause, and then returns ctx's error. A
// cgroup that is already frozen, by someone else, is left alone.
func Pause(ctx context.Context, l Layout, cg host.Cgroup, d time.Duration, j *Journal) error {
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
	fz, err := freezerOf(l, cg)
	if err != nil {
		return fmt.Errorf("pause %s: %w", cg, err)
	}
	if err := pause(ctx, fz, d, j); err != nil {
		return fmt.Errorf("pause %s (%s %s): %w", cg, fz.hierarchy, fz.dir, err)
	}
	return nil
}

func pause(ctx context.Context, fz freezer, d time.Duration, j *Journal) (err error) {
	id, original, err := j.begin(fz.file)
	if err != nil {
		return err
	}
	if original != fz.thaw {
		return j.Done(id) // frozen by someone else: theirs to thaw
	}
	defer func() {
		terr := writeControl(fz.file, fz.thaw)
		if terr != nil && !errors.Is(terr, host.ErrVanished) {
			err = errors.Join(err, fmt.Errorf("thaw: %w", terr)) // stays pending for Recover
			return
		}
		err = errors.Join(err, j.Done(id))
	}()
	start := time.Now()
	if err := writeControl(fz.file, fz.freeze); err != nil {
		return err
	}
	// The pause counts from the moment the freeze took hold, so wait for
	// it first, but no longer than freezeWait.
	for deadline := start.Add(freezeWait); ; {
		ok, err := fz.frozen()
		if err != nil {
			return err
		}
		if ok || time.Now().After(deadline) {
			break
		}
		if err := sleep(ctx, freezePoll); err != nil {
			return err
		}
	}
	return sleep(ctx, d)
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
func freezerOf(l Layout, cg host.Cgroup) (freezer, error) {
	memDir := l.Memory.Dir(cg)
	var tried []string
	if dir, ok := l.UnifiedDir(cg); ok {
		file := filepath.Join(dir, fileFreeze)
		fz := freezer{file: file, freeze: "1", thaw: "0", dir: dir, hierarchy: "cgroup v2",
			frozen: func() (bool, error) { return frozenV2(dir) }}
		if _, err := os.Stat(file); err == nil { // the root cgroup has none
			return fz, sameTasks(dir, memDir)
		}
		tried = append(tried, file)
	}
	if dir, ok := l.FreezerDir(cg); ok {
		file := filepath.Join(dir, fileFreezerV1)
		fz := freezer{file: file, freeze: "FROZEN", thaw: freezerThawedV1, dir: dir, hierarchy: "cgroup v1 freezer",
			frozen: func() (bool, error) {
				s, err := readControl(file)
				return s == "FROZEN", err
			}}
		if _, err := os.Stat(file); err == nil {
			return fz, sameTasks(dir, memDir)
		}
		tried = append(tried, file)
	}
	if len(tried) == 0 {
		return freezer{}, fmt.Errorf("no freezer has the cgroup (no cgroup.freeze in a unified hierarchy, "+
			"no freezer.state in a v1 freezer hierarchy): %w", errors.ErrUnsupported)
	}
	return freezer{}, fmt.Errorf("no freezer file among %s: %w", strings.Join(tried, ", "), errors.ErrUnsupported)
}

// frozenV2 reads the "frozen" key of dir/cgroup.events, which turns 1 once
// every task of the cgroup and its descendants has stopped
// (kernel/cgroup/freezer.c cgroup_update_frozen).
func frozenV2(dir string) (bool, error) {
	p := filepath.Join(dir, "cgroup.events")
	s, err := readControl(p)
	if err != nil {
		return false, err
	}
	for line := range strings.Lines(s) {
		if v, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "frozen "); ok {
			return v == "1", nil
		}
	}
	return false, fmt.Errorf("read %s: no frozen line", p)
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
