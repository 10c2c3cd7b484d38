package journal

import (
	"errors"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// AnchorName is the v1 freezer cgroup memcgd holds frozen while it
// freezes through the v1 freezer (cgroupfs/act's FreezerAnchor): empty,
// its own, recorded as any freeze is (FileFreezerV1, Original THAWED).
// Its undo thaws it and then removes it, as its holder would have.
const AnchorName = "memcgd.anchor"

// isAnchor reports whether c is the freeze of an anchor.
func isAnchor(c Change) bool {
	return filepath.Base(c.Path) == FileFreezerV1 && filepath.Base(filepath.Dir(c.Path)) == AnchorName
}

// removeAnchor removes the anchor directory whose freezer.state is p, once
// thawed: an anchor some task was put in meanwhile (EBUSY), or that is
// gone, stays as it is.
func removeAnchor(p string) error {
	err := unix.Rmdir(filepath.Dir(p))
	if err == nil || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EBUSY) || errors.Is(err, unix.ENOTEMPTY) {
		return nil
	}
	return err
}
