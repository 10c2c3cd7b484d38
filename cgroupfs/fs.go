package cgroupfs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/act"
	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/dirtytrack"
	"github.com/memcgd/memcgd/cgroupfs/journal"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/cgroupfs/observe"
	"github.com/memcgd/memcgd/cgroupfs/safeio"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// FS is the real kernel as a host.Host: the memory cgroups of one subtree
// of the mounted hierarchy, observed through cgroupfs (observe) and acted
// on with the actuators of package act. Stateful actions go through its journal.
// FS is safe for concurrent use.
type FS struct {
	layout   layout.Layout
	procRoot string
	under    host.Cgroup
	journal  *journal.Journal
	bio      *safeio.BoundedIO
	flusher  *act.Flusher
	pacer    *act.Pacer // nil for a read-only FS
	// writeOuts carries out targeted write-outs and keeps each cgroup's
	// cursor between them.
	writeOuts *act.WriteOuts
	fast      *fastPath // the tracker's share; fastpath.go
	log       *slog.Logger
	notifying atomic.Bool // CgroupEvents was called
	readOnce  bool        // FSOptions.ReadOnce

	// readers are idle Readers, each keeping the files it read open
	// (Reader.KeepFilesOpen); at most cap(readers) are kept, and one
	// returned beyond that is closed, so that no file is left open
	// unaccounted.
	readers chan *observe.Reader
	// squeezes are the v1 limit squeezes of Reclaim, which Observe
	// looks through; squeezeLog spaces out their info lines.
	squeezes   squeezes
	squeezeLog squeezeLog
	// anchor holds the v1 freezer's freezer_active key enabled while FS
	// freezes through it.
	anchor anchorHold
}

// idleReaders is how many idle Readers FS keeps: the agent's workers and
// the odd concurrent caller.
const idleReaders = 4

var (
	_ host.Host           = (*FS)(nil)
	_ host.DirtyCounter   = (*FS)(nil)
	_ host.FastPath       = (*FS)(nil)
	_ host.Freezer        = (*FS)(nil)
	_ host.CgroupNotifier = (*FS)(nil)
	_ host.Forgetter      = (*FS)(nil)
	_ host.Pacer          = (*FS)(nil)
)

// NewFS returns the host for the cgroups beneath under in layout l, with
// the default FSOptions. journal may be nil only for a read-only FS
// (memcgd stat): then the stateful actions fail.
func NewFS(l layout.Layout, procRoot string, under host.Cgroup, journal *journal.Journal) *FS {
	fs, err := NewFSOptions(l, procRoot, under, journal, FSOptions{})
	if err != nil {
		panic(err) // the defaults are valid
	}
	return fs
}

// FSOptions bounds what FS does to files on a tenant's behalf.
type FSOptions struct {
	// IO bounds each blocking file operation of write-out and flush.
	IO safeio.IOOptions
	// Flush limits full flushes host-wide.
	Flush act.FlushOptions
	// Log receives the outcome of flushes, which finish after Flush
	// returns; nil discards it.
	Log *slog.Logger
	// Tracker is the eBPF dirty tracker, loaded by the caller
	// (dirtytrack.Load), who closes it after FS's last use; nil is the
	// fallback: Dirtied scans /proc, WriteOut sees only open files, and
	// new cgroups are found by inotify. docs/lab/2026-11-30-fastpath.md.
	Tracker *dirtytrack.Tracker
	// NoTracker is why Tracker is nil (its load error, or "disabled by
	// --no-tracker"), for DirtyPath.
	NoTracker string
	// WriteOutBudget bounds how long a WriteOut goes on starting chunks
	// (act.DefaultWriteOutBudget when 0); each operation on a
	// filesystem is bounded by IO.
	WriteOutBudget time.Duration
	// WriteOutGap spaces a write-out's chunks (act.WriteOutsOptions.Gap);
	// 0 submits them back to back.
	WriteOutGap time.Duration
	// WriteOutYield is the gap a write-out keeps when another task has
	// been syncing on a device of its files (act.WriteOutsOptions.YieldGap,
	// act.Syncers over /sys); 0 never yields.
	WriteOutYield time.Duration
	// ReadOnce is for a caller that observes each cgroup about once,
	// siblings in a row (memcgd stat without a daemon): Observe then
	// keeps no control file open between reads, where keeping one costs
	// more than the open it would spare, and opens each relative to its
	// cgroup's parent directory (observe.Reader.OpenFromParents).
	ReadOnce bool
}

// NewFSOptions is NewFS with options; it fails on an invalid option.
func NewFSOptions(l layout.Layout, procRoot string, under host.Cgroup, journal *journal.Journal, opts FSOptions) (*FS, error) {
	bio, err := safeio.NewBoundedIO(opts.IO)
	if err != nil {
		return nil, err
	}
	fl, err := act.NewFlusher(opts.Flush, bio, opts.Log)
	if err != nil {
		return nil, err
	}
	wopts := act.WriteOutsOptions{Budget: opts.WriteOutBudget, Gap: opts.WriteOutGap, YieldGap: opts.WriteOutYield}
	if opts.WriteOutYield > 0 {
		wopts.Syncing = act.NewSyncers("/sys").Syncing
	}
	wo, err := act.NewWriteOuts(bio, procRoot, l, wopts)
	if err != nil {
		return nil, fmt.Errorf("fs options: %w", err)
	}
	fs := &FS{layout: l, procRoot: procRoot, under: under, journal: journal, bio: bio, flusher: fl,
		writeOuts: wo, log: opts.Log, readOnce: opts.ReadOnce,
		fast: newFastPath(opts.Tracker, opts.NoTracker, l.Memory, under, opts.Log)}
	fs.readers = make(chan *observe.Reader, idleReaders)
	if journal != nil {
		fs.pacer = &act.Pacer{Layout: l, ProcRoot: procRoot, Journal: journal, Under: under}
		if opts.Tracker != nil {
			fs.pacer.Dirtiers = fs.fast
		}
	}
	return fs, nil
}

// reader returns an idle Reader, or a new one.
func (fs *FS) reader() *observe.Reader {
	select {
	case r := <-fs.readers:
		return r
	default:
		r := observe.NewReader(fs.layout)
		if fs.readOnce {
			r.OpenFromParents()
		} else {
			r.KeepFilesOpen()
		}
		return r
	}
}

// putReader makes r idle again, or closes it when enough are.
func (fs *FS) putReader(r *observe.Reader) {
	select {
	case fs.readers <- r:
	default:
		r.Close()
	}
}

// Close closes the files FS keeps open for reading, removes the v1
// freezer cgroups FS made for the throttle (EnsureFreezer's mirrors) that
// are empty, and thaws and removes the v1 freezer anchor: at the daemon's
// exit, once every episode has ended, they would otherwise stay. A mirror
// that still holds tasks stays, as act/freezer_v1.go explains. FS may be
// used again; it reopens the files, and makes a mirror or the anchor
// again where a freeze needs one.
func (fs *FS) Close() {
	fs.fast.removeMirrors()
	fs.releaseAnchor()
	for {
		select {
		case r := <-fs.readers:
			r.Close()
		default:
			return
		}
	}
}

// Layout is the hierarchies FS works in.
func (fs *FS) Layout() layout.Layout { return fs.layout }

// Cgroups lists the memory cgroups WalkCgroups finds. If the managed
// subtree does not exist the error wraps host.ErrVanished (layout.Walk).
func (fs *FS) Cgroups(ctx context.Context) ([]host.Cgroup, error) {
	var cgs []host.Cgroup
	err := fs.WalkCgroups(func(cg host.Cgroup) error {
		cgs = append(cgs, cg)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return cgs, nil
}

// Observe reads cg's state. The hierarchy root has no limit; FS reports
// the machine's memory as its limit and what is not free as its usage, so
// that headroom computed over a chain of ancestors ends at the machine's
// free memory, as the kernel's global dirtyable memory does
// (mm/page-writeback.c, global_dirtyable_memory).
func (fs *FS) Observe(ctx context.Context, cg host.Cgroup) (memcg.Stat, error) {
	v1 := fs.layout.Memory.Version == layout.V1 // only v1 reclaim squeezes
	var before squeezeMark
	if v1 {
		before = fs.squeezes.mark(cg)
	}
	r := fs.reader()
	s, err := r.Observe(cg)
	fs.putReader(r)
	if err != nil {
		return s, err
	}
	if v1 {
		// v1's limit is Max too (observe.Reader.Observe).
		s.Limit = before.limit(s.Limit, fs.squeezes.mark(cg))
		s.Max = s.Limit
	}
	fs.fast.anchorLevel(cg, s.Dirty+s.Writeback)
	if cg == "/" && s.Limit == memcg.NoLimit {
		m, err := readMemInfo(fs.procRoot)
		if err != nil {
			return s, err
		}
		s.Limit, s.Usage = m.Total, m.Total-m.Free
	}
	return s, nil
}

// Reclaim reclaims up to n bytes from cg; see act.Reclaim.
func (fs *FS) Reclaim(ctx context.Context, cg host.Cgroup, n, usage uint64) (uint64, error) {
	if fs.journal == nil && fs.layout.Memory.Version == layout.V1 {
		return 0, fmt.Errorf("reclaim %s: read-only host has no journal for the v1 limit squeeze", cg)
	}
	if fs.layout.Memory.Version == layout.V1 {
		if dir := fs.layout.Memory.Dir(cg); dir != "" {
			// What the squeeze puts back, read before it lowers it.
			original, err := ctlfile.ReadUint(filepath.Join(dir, journal.FileLimitV1))
			if err != nil {
				return 0, fmt.Errorf("reclaim %s: %w", cg, err)
			}
			fs.squeezes.start(cg, original)
			defer fs.squeezes.end(cg)
		}
	}
	log := fs.log
	if fs.layout.Memory.Version == layout.V1 {
		log = fs.squeezeLog.logger(log, cg, time.Now())
	}
	return act.Reclaim(ctx, fs.layout, cg, n, usage, fs.journal, log)
}

// WriteOut starts write-out of cg's own files in chunks, from where its
// last write-out stopped, within FSOptions.WriteOutBudget, dirty bytes
// before each file's end at most (the step's observation of cg); see
// act.WriteOuts.WriteOut. Its files are those its tasks hold open, found
// in /proc; with the tracker, the files cg's subtree dirtied last
// (dirtytrack's Recent: a few map lookups) and, at cg's first write-out
// and then once every ListEvery (fastPath.listDue), every file the
// tracker recorded for cg and those its tasks hold open: what the recent
// ones may lack. A file found twice counts once in Files.
func (fs *FS) WriteOut(ctx context.Context, cg host.Cgroup, dirty uint64) (host.WriteOut, error) {
	src := act.Sources{Tasks: true}
	var terr error
	if fs.fast.tr != nil {
		src.Tasks = fs.fast.listDue(cg, time.Now())
		src.Tracker = fs.fast.tr
		src.Tracked, terr = fs.trackedInodes(cg, src.Tasks)
	}
	out, err := fs.writeOuts.WriteOut(ctx, cg, dirty, src)
	if errors.Is(err, host.ErrVanished) {
		return out, err
	}
	return out, errors.Join(err, terr)
}

// Flush starts a full flush of a filesystem cg writes to, if the
// host-wide rate allows, and returns at once; see Flusher.Flush. A flush
// in progress on that filesystem satisfies it (nil); otherwise it returns
// host.ErrRateLimited or host.ErrNothingToFlush.
func (fs *FS) Flush(ctx context.Context, cg host.Cgroup) error {
	_, err := fs.flusher.Flush(ctx, fs.procRoot, fs.layout, cg)
	return err
}

// StartFlush is Flush, saying what it did.
func (fs *FS) StartFlush(ctx context.Context, cg host.Cgroup) (act.FlushResult, error) {
	return fs.flusher.Flush(ctx, fs.procRoot, fs.layout, cg)
}

// WaitFlushes waits for the full flushes in progress, or ctx's end: at
// shutdown, bounded by ctx.
func (fs *FS) WaitFlushes(ctx context.Context) error { return fs.flusher.Wait(ctx) }

// IO returns the bound on FS's blocking file operations, for a second
// source of files to write out (act.WriteOutFD).
func (fs *FS) IO() *safeio.BoundedIO { return fs.bio }

// Pause freezes cg for d and thaws it.
func (fs *FS) Pause(ctx context.Context, cg host.Cgroup, d time.Duration) error {
	if fs.journal == nil {
		return fmt.Errorf("pause %s: read-only host has no journal", cg)
	}
	fs.holdAnchor(ctx, cg)
	var made []string
	err := act.PauseMirrored(ctx, fs.layout, fs.procRoot, cg, d, fs.journal, &made)
	fs.fast.froze(cg, made, err)
	return err
}

// Now is the wall clock.
func (fs *FS) Now() time.Time { return time.Now() }

// DirtyCounts counts the bytes cg's tasks have dirtied. With the tracker
// it is the tracker's monotonic counter of the bytes dirtied in cg's
// subtree since FS first asked (the first call starts it, at 0), and
// beside it the bytes of cg's subtree's dirty pages truncated unwritten
// (where the tracker counts them); otherwise the sum over cg's tasks of
// /proc/PID/io (act.Dirtied), which falls when a task exits.
func (fs *FS) DirtyCounts(ctx context.Context, cg host.Cgroup) (host.DirtyCounts, error) {
	if fs.fast.tr != nil {
		return fs.fast.counts(cg)
	}
	n, err := act.Dirtied(ctx, fs.procRoot, fs.layout, cg)
	return host.DirtyCounts{Dirtied: n}, err
}
