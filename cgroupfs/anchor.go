package cgroupfs

import (
	"context"
	"sync"

	"github.com/memcgd/memcgd/cgroupfs/act"
	"github.com/memcgd/memcgd/host"
)

// anchorHold is FS's hold of the v1 freezer anchor (act.FreezerAnchor):
// taken before the first freeze that goes through the v1 freezer, kept
// until Close, so that the throttle's freezes and thaws never switch the
// kernel's freezer_active key.
type anchorHold struct {
	mu sync.Mutex
	a  *act.FreezerAnchor
	// failed says the last attempt failed: the throttle freezes without
	// an anchor, as before it existed, and FS tries again after Close.
	failed bool
}

// holdAnchor takes the anchor before a freeze of cg, if the freeze goes
// through the v1 freezer and FS does not hold it yet. A failure is logged
// once; the freeze goes ahead without it.
func (fs *FS) holdAnchor(ctx context.Context, cg host.Cgroup) {
	h := &fs.anchor
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.a != nil || h.failed || !act.UsesV1Freezer(fs.layout, cg) {
		return
	}
	a, err := act.HoldFreezerAnchor(context.WithoutCancel(ctx), fs.layout, fs.under, fs.journal)
	if err != nil {
		h.failed = true
		if fs.log != nil {
			fs.log.Warn("v1 freezer anchor not held: each freeze and thaw of a cgroup rewrites the kernel's freezer_active key, "+
				"which livelocked Debian's 6.1 (docs/freezer.md)", "err", err)
		}
		return
	}
	h.a = a
	if fs.log != nil {
		fs.log.Info("v1 freezer anchor held: freezes and thaws leave the kernel's freezer_active key on", "dir", a.Dir(), "frozen_by_memcgd", a.Held())
	}
}

// releaseAnchor lets the anchor go (FS.Close).
func (fs *FS) releaseAnchor() {
	h := &fs.anchor
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.a
	h.a, h.failed = nil, false
	if a == nil {
		return
	}
	if err := a.Release(); err != nil && fs.log != nil {
		fs.log.Warn("release the v1 freezer anchor", "dir", a.Dir(), "err", err)
	}
}
