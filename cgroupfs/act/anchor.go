package act

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"

	"github.com/memcgd/memcgd/cgroupfs/journal"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
)

// The v1 freezer counts its freezing cgroups in a static key,
// freezer_active (kernel/cgroup/legacy_freezer.c, freezer_apply_state),
// which freezing() tests at every try_to_freeze() (include/linux/freezer.h,
// kernel/signal.c get_signal). The freeze of the first freezing cgroup and
// the thaw of the last each rewrite the kernel's text at every site of the
// key (kernel/jump_label.c; arch/x86/kernel/alternative.c text_poke_bp),
// with every CPU interrupted to synchronise. A throttle that freezes and
// thaws a cgroup hundreds of times a second rewrites it as often, and on
// Debian's 6.1 (6.1.192-3, in the test VM) that livelocks the machine:
// tasks of other cgroups spin in get_signal() on their way back to user
// space and never schedule again (docs/freezer.md, "The freezer anchor").
//
// A FreezerAnchor holds the key enabled while memcgd may freeze through
// the v1 freezer: an empty freezer cgroup of its own, frozen, so that a
// tenant's freeze or thaw changes no kernel text. It costs what any frozen
// cgroup costs: freezing() takes its slow path, a flag test and a lookup
// of the task's freezer cgroup, at each try_to_freeze().

// AnchorName is the name of the anchor's freezer cgroup, beneath the
// managed subtree's place in the v1 freezer hierarchy. A memory cgroup of
// that name is never given a freezer mirror (EnsureFreezer): its tasks
// would join the anchor and stay frozen.
const AnchorName = journal.AnchorName

// FreezerAnchor is a held anchor; Release lets it go.
type FreezerAnchor struct {
	dir  string
	made []string         // directories made for it, outermost first
	a    *journal.Applied // nil when another holder had frozen it
	own  bool             // the anchor's directory is this holder's to remove
}

// Dir is the anchor's freezer cgroup directory.
func (a *FreezerAnchor) Dir() string { return a.dir }

// Held reports whether this holder froze the anchor (false: it found it
// frozen by another holder, who keeps the key enabled meanwhile).
func (a *FreezerAnchor) Held() bool { return a.a != nil }

// HoldFreezerAnchor makes the anchor beneath under's place in l's v1 freezer
// hierarchy (with its missing parents, as EnsureFreezer makes a mirror),
// or takes the one there, and freezes it through the journal, so that a
// crash leaves it to Recover to thaw. An anchor that another holder froze
// is left frozen and not written. One that holds tasks is refused:
// freezing it would stop them.
func HoldFreezerAnchor(ctx context.Context, l layout.Layout, under host.Cgroup, j *journal.Journal) (*FreezerAnchor, error) {
	if j == nil {
		return nil, fmt.Errorf("hold freezer anchor: a freeze needs a journal; got nil")
	}
	if l.Freezer == nil {
		return nil, fmt.Errorf("hold freezer anchor: no v1 freezer hierarchy is mounted: %w", errors.ErrUnsupported)
	}
	cg := host.Cgroup(path.Join(string(under), AnchorName))
	if err := layout.CheckPath(cg); err != nil {
		return nil, fmt.Errorf("hold freezer anchor: %w", err)
	}
	dir := l.Freezer.Dir(cg)
	if dir == "" {
		return nil, fmt.Errorf("hold freezer anchor %s: outside the mounted freezer subtree %s of %s", cg, l.Freezer.Root, l.Freezer.Mount)
	}
	made, err := mkdirFreezer(*l.Freezer, cg)
	a := &FreezerAnchor{dir: dir, made: made, own: true}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("hold freezer anchor: %w", err), RemoveFreezer(made))
	}
	fail := func(err error) (*FreezerAnchor, error) {
		return nil, errors.Join(fmt.Errorf("hold freezer anchor %s: %w", dir, err), a.remove())
	}
	if pids, err := subtreeProcs(dir); err != nil {
		return fail(err)
	} else if len(pids) > 0 {
		return fail(fmt.Errorf("it holds tasks %v, which a frozen anchor would stop; move them out of it", pids))
	}
	file := filepath.Join(dir, journal.FileFreezerV1)
	other := errors.New("frozen by another holder")
	applied, err := j.Apply(ctx, file, journal.FreezerFrozenV1, journal.FreezerFrozenV1, func(original string) error {
		if original != journal.FreezerThawedV1 {
			return other
		}
		return nil
	})
	switch {
	case errors.Is(err, other):
		return &FreezerAnchor{dir: dir}, nil // theirs: held, not ours to thaw or remove
	case err != nil:
		return fail(err)
	}
	a.a = applied
	return a, nil
}

// Release thaws the anchor, if this holder froze it, and removes its
// directory and the parents made for it, if they are empty. It may be
// called more than once.
func (a *FreezerAnchor) Release() error {
	var err error
	if a.a != nil {
		err = a.a.Undo()
	}
	return errors.Join(err, a.remove())
}

// remove removes the directories this holder may remove.
func (a *FreezerAnchor) remove() error {
	if !a.own {
		return nil
	}
	dirs := a.made
	if len(dirs) == 0 || dirs[len(dirs)-1] != a.dir {
		dirs = append(dirs[:len(dirs):len(dirs)], a.dir) // found, not made: left by a crash, and now ours
	}
	a.made, a.own = nil, false
	return RemoveFreezer(dirs)
}

// UsesV1Freezer reports whether a freeze of cg goes through the v1 freezer
// hierarchy (freezerOf): l has one, and cg has no cgroup.freeze in a
// unified hierarchy.
func UsesV1Freezer(l layout.Layout, cg host.Cgroup) bool {
	if l.Freezer == nil {
		return false
	}
	dir, ok := l.UnifiedDir(cg)
	return !ok || !hasFreeze(dir)
}
