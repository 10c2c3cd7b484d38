package act

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/dirtytrack"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/cgroupfs/safeio"
	"github.com/memcgd/memcgd/host"
)

// A targeted write-out is shaped like the kernel's flusher. The flusher
// writes a bounded chunk of each dirty inode per pass and rotates between
// inodes (fs/fs-writeback.c, writeback_sb_inodes: wbc.nr_to_write =
// writeback_chunk_size(), then requeue_inode), and every HZ/10 it leaves
// the inode list to check whether its work is done (wb_writeback). So no
// inode, and no single huge range, holds the device's request queue or a
// data=ordered jbd2 commit, which waits for the data of every inode in
// its transaction, for long.
//
// sync_file_range(SYNC_FILE_RANGE_WRITE) over a whole file submits every
// dirty page of it before it returns, blocking whenever the request queue
// is full: with gigabytes dirty, one call held the device for seconds. So
// a write-out submits ranges of WriteChunk bytes (SpacedChunk, a gap
// apart, with WriteOutsOptions.Gap), one per file per round, rotating
// through the cgroup's files, and starts no chunk after its budget
// (WriteOutsOptions.Budget), nor after a chunk that found the device's
// queue full (WriteOutQueueFull); where a file's write-out stopped, and
// which file is next, is kept per cgroup (a cursor) for the next
// write-out to continue from. The cursors are kept here rather than
// returned to the caller: they name files (device and inode), which the
// policy, pure and kernel-agnostic, has no use for, and the host
// interface has no place for; FS drops a cgroup's with Forget.
//
// A range bounds the bytes a call covers, not the dirty pages it finds,
// so a range of WriteChunk submits at most WriteChunk. A file is covered
// from its cursor to its end, and again from its tail (tailSpan: the
// cgroup's dirty bytes before its end, where an appending writer's dirty
// pages are), and at most that much per write-out, so a write-out ends
// once every file has been covered that far, or its budget is spent.
// Before its tail, each write-out also sweeps one SweepStride of the
// file's rest, from a sweep cursor that wraps round: a file written in
// place (pre-allocated, a database's data file, fio's) holds its dirty
// pages anywhere, and the sweep reaches them within size / SweepStride
// write-outs.

// WriteChunk is the most one sync_file_range call of a targeted write-out
// covers: the kernel's MIN_WRITEBACK_PAGES (4 MiB, fs/fs-writeback.c).
// writeback_chunk_size() is min(avg_write_bandwidth / 2, dirty_limit /
// DIRTY_SCOPE, nr_pages) rounded down to a multiple of it after adding
// it, which is MIN_WRITEBACK_PAGES itself for a dirty limit below
// DIRTY_SCOPE (8) times it, 32 MiB: a cgroup of up to 320 MiB at memcgd's
// default dirty_ratio of 10. Larger chunks amortise the flusher's work per
// inode over a fast device; here a chunk is one system call, and a larger
// one holds the request queue longer per turn.
const WriteChunk = 4 << 20

// SweepStride is how much of a file before its tail one write-out sweeps
// in one sync_file_range call. A clean range costs little however long:
// the call finds dirty pages by the page cache's dirty tag
// (mm/page-writeback.c, write_cache_pages, filemap_get_folios_tag), which
// skips clean subtrees whole; and what a range submits is bounded by the
// dirty pages it holds, which for the cgroup's own files is at most its
// dirty bytes.
const SweepStride = 64 << 20

// SweepFound is how long a sweep's call takes when it found dirty pages
// to submit: a clean stride costs about a microsecond, submitting a page
// tens. The next write-out sweeps that stride again rather than the next:
// a writer in place (fio, a database filling its file) dirties near where
// it dirtied last, and is otherwise reached only once a round of the
// file. A clean stride that took this long (a preempted call) is swept
// once more, which costs as little.
const SweepFound = 50 * time.Microsecond

// WriteOutQueueFull is how long a chunk's sync_file_range may take before
// the write-out stops after it: submitting 4 MiB of dirty pages costs well
// under a millisecond of CPU, so a call that took longer waited for room
// in the device's request queue (or for blk-wbt's writeback depth,
// block/blk-wbt.c). The device then has a full queue to work on until the
// next write-out, and more chunks now would only block the write-out, and
// with it the cgroup's next action, for as long.
const WriteOutQueueFull = 2 * time.Millisecond

// DefaultWriteOutBudget is WriteOutsOptions.Budget's default: after it, a
// write-out starts no new chunk. Shorter than the flusher's HZ/10 between
// checks, since the scheduler starts no other action of the cgroup (its
// background reclaim included) while a write-out runs, and long enough to
// fill a request queue: what it leaves queued keeps the device busy until
// the next write-out, at the cgroup's next step.
const DefaultWriteOutBudget = 10 * time.Millisecond

// SpacedChunk is the range a chunk covers when the write-out spaces its
// chunks (WriteOutsOptions.Gap): the self-paced writer's megabyte, a
// quarter of what one WriteChunk hands the device at once.
const SpacedChunk = 1 << 20

// MaxWriteOutGap bounds WriteOutsOptions.Gap: a gap of a millisecond
// already caps one write-out at a gigabyte a second.
const MaxWriteOutGap = time.Millisecond

// WriteOutsOptions configures WriteOuts.
type WriteOutsOptions struct {
	// Budget is how long a write-out goes on starting chunks; one chunk
	// is always started. Default DefaultWriteOutBudget.
	Budget time.Duration
	// Gap, if not zero, spaces a write-out's chunks: each covers
	// SpacedChunk, and the next is not started until Gap after the last
	// one's call returned (a sweep's call, which finds little, excepted).
	// A write-out that submits its megabytes back to back hands the
	// device a burst that a neighbour's fdatasync on the same device
	// waits behind; spaced, the device gets them about as the self-paced
	// writer submits its own. It costs the writer throughput, the more
	// the faster it dirties, since the write-out holds the cgroup's next
	// action meanwhile. At most MaxWriteOutGap.
	Gap time.Duration
	// YieldGap, if not zero, is the gap a write-out keeps, as Gap does,
	// when Syncing says a device of its files served a cache flush
	// lately: another task fsyncs there, and its flush waits for the
	// chunks queued before it. At most MaxWriteOutGap; Gap, if longer,
	// holds.
	YieldGap time.Duration
	Syncing  func(dev uint64) bool
	// sleep waits; tests replace it.
	sleep func(time.Duration)
	// sync is sync_file_range(fd, off, n, SYNC_FILE_RANGE_WRITE); tests
	// replace it.
	sync func(fd int, off, n int64) error
	// now is the clock; tests replace it.
	now func() time.Time
}

// WriteOuts carries out targeted write-outs and keeps each cgroup's
// cursor between them. It is safe for concurrent use; two concurrent
// write-outs of one cgroup do not share a cursor (the second starts
// afresh, and what it learns is dropped).
type WriteOuts struct {
	bio      *safeio.BoundedIO // immutable
	procRoot string            // immutable
	layout   layout.Layout     // immutable
	opts     WriteOutsOptions  // immutable

	mu      sync.Mutex
	cursors map[host.Cgroup]*cursor // guarded by mu
}

// cursor is where a cgroup's write-out stands: the offset each file's
// next chunk starts at, and the file the next write-out begins with. A
// write-out holds it (busy, under WriteOuts.mu) and alone reads and
// writes the rest while it does.
type cursor struct {
	busy bool // guarded by WriteOuts.mu
	at   map[fileID]int64
	// sweep is where each file's next sweep (SweepStride) begins.
	sweep map[fileID]int64
	next  fileID
	// listed are the files of the last write-out that listed the
	// cgroup's files in full (Sources.Tasks): the later ones, which take
	// only the tracker's recent files, go on with them too.
	listed []chunkFile
}

// fileID names a file by device and inode.
type fileID struct{ dev, ino uint64 }

// NewWriteOuts returns a WriteOuts that bounds its file operations with
// bio and lists tasks under procRoot in l.
func NewWriteOuts(bio *safeio.BoundedIO, procRoot string, l layout.Layout, opts WriteOutsOptions) (*WriteOuts, error) {
	switch {
	case opts.Budget < 0:
		return nil, fmt.Errorf("write-out options: Budget %v: want 0 (default %v) or more", opts.Budget, DefaultWriteOutBudget)
	case opts.Budget == 0:
		opts.Budget = DefaultWriteOutBudget
	}
	if opts.Gap < 0 || opts.Gap > MaxWriteOutGap {
		return nil, fmt.Errorf("write-out options: Gap %v: want 0 (none) to %v", opts.Gap, MaxWriteOutGap)
	}
	if opts.YieldGap < 0 || opts.YieldGap > MaxWriteOutGap {
		return nil, fmt.Errorf("write-out options: YieldGap %v: want 0 (none) to %v", opts.YieldGap, MaxWriteOutGap)
	}
	if opts.sleep == nil {
		opts.sleep = time.Sleep
	}
	if opts.sync == nil {
		opts.sync = func(fd int, off, n int64) error {
			return unix.SyncFileRange(fd, off, n, unix.SYNC_FILE_RANGE_WRITE)
		}
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	return &WriteOuts{bio: bio, procRoot: procRoot, layout: l, opts: opts, cursors: make(map[host.Cgroup]*cursor)}, nil
}

// gap is the gap a write-out of files keeps between its chunks: Gap, or
// YieldGap if longer and a device of the files is syncing. Syncing reads
// a device at most every few milliseconds, so asking it of each file is
// cheap.
func (w *WriteOuts) gap(files []chunkFile) time.Duration {
	if w.opts.YieldGap <= w.opts.Gap || w.opts.Syncing == nil {
		return w.opts.Gap
	}
	for _, f := range files {
		if w.opts.Syncing(f.id.dev) {
			return w.opts.YieldGap
		}
	}
	return w.opts.Gap
}

// chunk is the most one chunk covers when chunks are gap apart.
func chunk(gap time.Duration) int64 {
	if gap > 0 {
		return SpacedChunk
	}
	return WriteChunk
}

// Forget drops cg's cursor.
func (w *WriteOuts) Forget(cg host.Cgroup) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.cursors, cg)
}

// take returns cg's cursor, marked busy, or a new one not kept if it is
// busy.
func (w *WriteOuts) take(cg host.Cgroup) *cursor {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.cursors[cg]
	switch {
	case c == nil:
		c = &cursor{at: make(map[fileID]int64)}
		w.cursors[cg] = c
	case c.busy:
		return &cursor{at: make(map[fileID]int64)}
	}
	c.busy = true
	return c
}

func (w *WriteOuts) put(c *cursor) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c.busy = false
}

// Sources are the files a write-out covers.
type Sources struct {
	// Tasks: the regular files cg's tasks (those of its descendants
	// included, as memory charges are hierarchical) have open for
	// writing, found by the O_ACCMODE bits of /proc/PID/fdinfo/N, and
	// their shared writable file mappings, found in /proc/PID/maps, on
	// filesystems SafeFS allows. Such a listing, with Tracked, is taken
	// as the cgroup's files in full: write-outs without it cover the
	// files it found too, since one write-out covers a file only as far
	// as its budget allows.
	Tasks bool
	// Tracked are files the eBPF tracker recorded for cg, reopened by
	// handle with Tracker (dirtytrack.Tracker.OpenInode).
	Tracker *dirtytrack.Tracker
	Tracked []dirtytrack.Inode
}

// WriteOut starts write-out of the dirty pages of cg's files (src), in
// chunks of WriteChunk rotating between the files, within the budget,
// from where the previous write-out of cg stopped. Files of other cgroups
// are touched only when a task of cg has them open too. Tasks and files
// that vanish meanwhile are skipped, and so are descriptors that stop
// naming the file listed (CheckedReopen), and tracked inodes deleted
// meanwhile or refused by the tracker (not regular files on a filesystem
// it reopens). Every operation that may block runs under the BoundedIO,
// one operation per filesystem per round. dirty is cg's dirty page cache
// as the caller last observed it: how far before each file's end its
// tail is covered (tailSpan). It returns how many distinct files it
// started, and dirty as the bytes.
//
// Dirty pages of files the cgroup's tasks no longer have open, and the
// tracker did not record, are out of reach: that is what Flush is for.
func (w *WriteOuts) WriteOut(ctx context.Context, cg host.Cgroup, dirty uint64, src Sources) (host.WriteOut, error) {
	start := w.opts.now()
	if w.layout.Memory.Dir(cg) == "" {
		return host.WriteOut{}, fmt.Errorf("write out %s: outside the mounted memory hierarchy %s", cg, w.layout.Memory.Mount)
	}
	out := host.WriteOut{Bytes: dirty}
	var files []chunkFile
	if src.Tasks {
		tfs, mounts, err := listFiles(ctx, w.bio, w.procRoot, w.layout.Memory.Dir(cg), true)
		if err != nil {
			return out, fmt.Errorf("write out %s: %w", cg, err)
		}
		for _, tf := range tfs {
			files = append(files, chunkFile{id: fileID{tf.dev, tf.want.Ino}, key: tf.key(), open: w.taskOpener(tf, mounts)})
		}
	}
	for _, ino := range src.Tracked {
		files = append(files, chunkFile{id: fileID{ino.Dev, ino.Ino}, key: safeio.DeviceKey(ino.Dev), open: trackedOpener(src.Tracker, ino)})
	}
	c := w.take(cg)
	defer w.put(c)
	if src.Tasks {
		c.listed = files
	} else {
		files = append(files, c.listed...)
	}
	gap := w.gap(files)
	n, err := w.chunks(ctx, c, files, start.Add(w.opts.Budget), tailSpan(dirty), gap)
	out.Files, out.Yielded = n, gap > w.opts.Gap
	if err != nil {
		return out, fmt.Errorf("write out %s: %w", cg, err)
	}
	return out, nil
}

// chunkFile is a file of a write-out: its name in the listing, what an
// operation on it may block on, and how to open it for write-out (a
// checked reopen, which may block: under BoundedIO).
type chunkFile struct {
	id   fileID
	key  safeio.Key
	open func() (*os.File, error)
}

// errSkip marks a file that is not written out and not an error: its task
// closed it or exited, its slot names another file, its inode was deleted
// or refused.
var errSkip = errors.New("skipped")

// taskOpener opens tf's /proc link with O_PATH and checks and reopens it.
func (w *WriteOuts) taskOpener(tf taskFile, mounts *safeio.Mounts) func() (*os.File, error) {
	return func() (*os.File, error) {
		pfd, err := unix.Open(tf.path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, errSkip
		}
		defer unix.Close(pfd)
		f, _, err := safeio.CheckedReopen(w.procRoot, pfd, tf.want, mounts)
		if err != nil {
			return nil, errSkip
		}
		return f, nil
	}
}

// trackedOpener reopens ino by handle.
func trackedOpener(tr *dirtytrack.Tracker, ino dirtytrack.Inode) func() (*os.File, error) {
	return func() (*os.File, error) {
		f, err := tr.OpenInode(ino)
		switch {
		case errors.Is(err, unix.ESTALE), errors.Is(err, unix.ENOENT), errors.Is(err, dirtytrack.ErrRefused):
			return nil, errSkip
		case err != nil:
			return nil, err
		}
		return f, nil
	}
}

// turn is what one round did to one file, recorded on the round's own
// goroutine and taken by chunks only once the round returned.
type turn struct {
	id      fileID // the file's identity after reopening
	off     int64  // where its next chunk starts
	sweep   int64  // where its next sweep starts
	covered int64  // bytes this round covered
	size    int64
	started bool // a chunk was submitted
	done    bool // nothing more to do for it in this write-out
	full    bool // its chunk waited for the device's queue (WriteOutQueueFull)
	err     error
}

// chunks runs the rounds of one write-out over files from c: each round
// gives every file not yet done one chunk from its cursor, a filesystem's
// files in one bounded operation, until every file is covered round to
// its cursor, a chunk finds the device's queue full, or deadline passes
// (the first chunk is always started).
// It returns how many distinct files had a chunk started.
func (w *WriteOuts) chunks(ctx context.Context, c *cursor, files []chunkFile, deadline time.Time, span int64, gap time.Duration) (int, error) {
	files = rotate(dedupFiles(files), c.next)
	if len(files) == 0 {
		c.at = make(map[fileID]int64)
		return 0, nil
	}
	type state struct {
		off, covered, sweep int64
		done, swept         bool
	}
	st := make([]state, len(files))
	for i, f := range files {
		st[i].off, st[i].sweep = c.at[f.id], c.sweep[f.id]
	}
	var (
		errs     []error
		served   = make(map[fileID]int) // by identity after reopening: the file that owns it
		started  = make(map[int]bool)
		stopped  = -1 // the first file the deadline left without its turn
		anyChunk bool
		// lastChunk is when the last chunk's call returned, for the
		// gap (spacer); a round's own until its Do returns.
		lastChunk time.Time
	)
	groups := groupByKey(files)
	for stopped < 0 {
		progressed := false
		for _, g := range groups {
			var todo []int
			for _, i := range g {
				if !st[i].done {
					todo = append(todo, i)
				}
			}
			if len(todo) == 0 {
				continue
			}
			if err := ctx.Err(); err != nil {
				errs = append(errs, err)
				stopped = todo[0]
				break
			}
			if anyChunk && !w.opts.now().Before(deadline) {
				stopped = todo[0]
				break
			}
			turns := make([]turn, len(todo))
			sweeps := make([]bool, len(todo))
			for k, i := range todo {
				turns[k].off, turns[k].sweep, sweeps[k] = st[i].off, st[i].sweep, !st[i].swept
			}
			// Each round's turns, and what it reads, are the round
			// goroutine's own until Do returns: an abandoned round may
			// still be at them.
			first, until := !anyChunk, deadline
			sp := spacer{last: lastChunk, gap: gap}
			err := w.bio.Do(ctx, files[todo[0]].key, func() {
				for k, i := range todo {
					if (!first || k > 0) && !w.opts.now().Before(until) {
						return // the rest waits for the next write-out
					}
					if turns[k] = w.turn(files[i], turns[k].off, span, turns[k].sweep, sweeps[k], &sp); turns[k].full {
						return
					}
				}
			})
			if err != nil {
				// A filesystem that stopped answering is left whole,
				// for the next write-out, which BoundedIO refuses while
				// this one is blocked.
				errs = append(errs, fmt.Errorf("write out %d files: %w", len(todo), err))
				for _, i := range todo {
					st[i].done = true
				}
				continue
			}
			lastChunk = sp.last
			for k, i := range todo {
				t := turns[k]
				if t.size == 0 && !t.done && t.err == nil {
					// Its turn did not come before the deadline.
					if stopped < 0 {
						stopped = i
					}
					continue
				}
				if owner, ok := served[t.id]; ok && owner != i && t.id != (fileID{}) {
					st[i].done = true // reached twice: its owner has it
					continue
				}
				if t.id != (fileID{}) {
					served[t.id] = i
				}
				if t.err != nil && !errors.Is(t.err, errSkip) {
					errs = append(errs, t.err)
				}
				st[i].off, st[i].sweep, st[i].swept = t.off, t.sweep, true
				st[i].covered += t.covered
				st[i].done = t.done || st[i].covered >= min(t.size, span)
				if t.started {
					started[i], anyChunk, progressed = true, true, true
				}
				if t.full {
					deadline = time.Time{} // the device has enough to do
				}
			}
			if stopped >= 0 {
				break
			}
		}
		if !progressed && stopped < 0 {
			break // every file done
		}
	}
	// The cursor: each file's offset, and the file the next write-out
	// begins with: the first the deadline left out, or the one after this
	// write-out's first, so that the first turn (always taken) rotates.
	at, sweep := make(map[fileID]int64, len(files)), make(map[fileID]int64, len(files))
	for i, f := range files {
		at[f.id], sweep[f.id] = st[i].off, st[i].sweep
	}
	c.at, c.sweep = at, sweep
	if stopped >= 0 {
		c.next = files[stopped].id
	} else {
		c.next = files[1%len(files)].id
	}
	return len(started), errors.Join(errs...)
}

// spacer keeps a write-out's chunks its gap apart.
type spacer struct {
	last time.Time     // when the last chunk's call returned; zero: none yet
	gap  time.Duration // the write-out's (WriteOuts.gap)
}

// wait sleeps until the gap after the last chunk, if that is later than
// now.
func (w *WriteOuts) wait(sp *spacer) {
	if sp.gap == 0 || sp.last.IsZero() {
		return
	}
	if d := sp.last.Add(sp.gap).Sub(w.opts.now()); d > 0 {
		w.opts.sleep(d)
	}
}

// turn is one file's turn: open it, sweep it from sweep if asked
// (SweepStride), and submit the chunk at off, or at its tail (tailStart)
// if off is before the tail or past the end, sp's gap after the last
// chunk. It may block.
func (w *WriteOuts) turn(f chunkFile, off, span, sweep int64, sweeping bool, sp *spacer) turn {
	t := turn{off: off, sweep: sweep}
	file, err := f.open()
	if err != nil {
		t.done, t.err = true, err
		return t
	}
	defer file.Close()
	var s unix.Stat_t
	if err := unix.Fstat(int(file.Fd()), &s); err != nil {
		t.done, t.err = true, fmt.Errorf("fstat: %w", err)
		return t
	}
	t.id, t.size = fileID{s.Dev, s.Ino}, s.Size
	if s.Size <= 0 {
		// sync_file_range of 0 bytes covers the whole file: an empty
		// one has nothing to write.
		t.done = true
		return t
	}
	tail := tailStart(s.Size, span)
	if sweeping && tail > 0 {
		if sweep >= tail {
			sweep = 0
		}
		n := min(int64(SweepStride), tail-sweep)
		start := w.opts.now()
		if err := w.opts.sync(int(file.Fd()), sweep, n); err != nil {
			t.done, t.err = true, fmt.Errorf("sync_file_range: %w", err)
			return t
		}
		took := w.opts.now().Sub(start)
		t.sweep, t.started = sweep+n, true
		if took >= SweepFound {
			t.sweep = sweep // the same stride again next time
		}
		if t.full = took >= WriteOutQueueFull; t.full {
			return t // the sweep found enough for the device
		}
	}
	if off < tail || off >= s.Size {
		off = tail
	}
	n := min(chunk(sp.gap), s.Size-off)
	w.wait(sp)
	start := w.opts.now()
	if err := w.opts.sync(int(file.Fd()), off, n); err != nil {
		t.done, t.err = true, fmt.Errorf("sync_file_range: %w", err)
		return t
	}
	sp.last = w.opts.now()
	t.full = sp.last.Sub(start) >= WriteOutQueueFull
	t.off, t.covered, t.started = off+n, n, true
	return t
}

// tailSpan is how far from its end a file's write-out begins, and how
// much of it one write-out covers at most: the cgroup's dirty bytes when
// the write-out began, in whole chunks, at least one. A file can hold no
// more of the cgroup's dirty pages than that, and an appending writer's
// are all there; a file dirtied further from its end is reached by the
// sweep (SweepStride). Covering a large file from its start in chunks
// instead spent whole write-outs on clean ranges (a call each, which
// ext4_writepages makes cost a tenth of a millisecond or more) while its
// dirty tail waited and the device idled.
func tailSpan(dirty uint64) int64 {
	chunks := (dirty + WriteChunk - 1) / WriteChunk
	return int64(max(chunks, 1) * WriteChunk)
}

// tailStart is where a file of size bytes is written out from: span
// before its end, on a chunk's boundary, or its start.
func tailStart(size, span int64) int64 {
	return max(size-span, 0) / WriteChunk * WriteChunk
}

// dedupFiles keeps the first of each file listed twice (a task's and the
// tracker's, or two tasks').
func dedupFiles(files []chunkFile) []chunkFile {
	seen := make(map[fileID]bool, len(files))
	out := files[:0:0]
	for _, f := range files {
		if seen[f.id] {
			continue
		}
		seen[f.id] = true
		out = append(out, f)
	}
	return out
}

// rotate returns files beginning with the one named next, if listed.
func rotate(files []chunkFile, next fileID) []chunkFile {
	for i, f := range files {
		if f.id == next {
			return append(files[i:len(files):len(files)], files[:i]...)
		}
	}
	return files
}

// groupByKey groups the indices of files by what an operation on them
// may block on, in the order of their first appearance.
func groupByKey(files []chunkFile) [][]int {
	index := make(map[safeio.Key]int)
	var groups [][]int
	for i, f := range files {
		g, ok := index[f.key]
		if !ok {
			g = len(groups)
			index[f.key] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}
