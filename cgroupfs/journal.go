package cgroupfs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/memcgd/memcgd/atomicfile"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/memcgd/memcgd/cgroupfs/format"
	"github.com/memcgd/memcgd/host"
	"golang.org/x/sys/unix"
)

// The control files memcgd changes and must put back. A limit is only
// ever lowered, a cgroup only ever frozen; the journal refuses any other
// file, so a damaged or planted journal cannot make memcgd write
// anywhere else.
const (
	fileLimitV1     = "memory.limit_in_bytes" // v1 hard limit (limit squeeze)
	fileHigh        = "memory.high"           // v2 throttle limit
	fileMax         = "memory.max"            // v2 hard limit
	fileFreeze      = "cgroup.freeze"         // v2 freezer: "1" frozen, "0" thawed
	fileFreezerV1   = "freezer.state"         // v1 freezer: FROZEN, FREEZING, THAWED
	freezerThawedV1 = "THAWED"
)

// ErrChangePending reports that a control file already has a change in the
// journal that has not been undone. Two changes to one file at a time would
// make the second record the first's value as the original, and undoing
// them could then leave the file changed.
var ErrChangePending = errors.New("control file has a pending change")

// Change is one stateful write to a cgroup control file: the file and the
// value that undoes the write.
type Change struct {
	// Path is the control file, for example
	// /sys/fs/cgroup/memory/a/memory.limit_in_bytes.
	Path string `json:"path"`
	// Original is the value the file held before the change, written back
	// to undo it.
	Original string `json:"original"`
}

// String describes the change for logs.
func (c Change) String() string { return fmt.Sprintf("%s (original %q)", c.Path, c.Original) }

// entry is one line of the journal file: a change recorded under ID, or,
// with Done set, the note that change ID has been undone.
type entry struct {
	ID   uint64 `json:"id"`
	Done bool   `json:"done,omitempty"`
	*Change
}

// Journal records memcgd's stateful changes to cgroupfs (a lowered limit, a
// frozen cgroup) so that a crash never leaves one behind: a change is
// written to the journal and synced to disk before it is made, marked done
// after it is undone, and Recover undoes whatever a previous run left
// pending.
//
// The file holds JSON lines, appended. A torn last line (a crash during a
// write) is ignored: the change it would have recorded was never made,
// because the change waits for the record's fsync. Opening the journal
// rewrites it compacted, through a temporary file and a rename.
//
// A Journal is safe for concurrent use.
type Journal struct {
	path   string
	mounts []string // cgroupfs mounts the journal may write beneath

	mu      sync.Mutex
	dir     *os.File // the journal's directory, flock'ed while open
	f       *os.File
	next    uint64
	pending map[uint64]Change
	lines   int // lines in the file, to know when to compact
}

// compactLines is how long the file may grow before a Done that leaves
// nothing pending rewrites it empty.
const compactLines = 1024

// OpenJournal opens the journal at path, creating its directory (0700) and
// the file (0600) if needed. Changes it records or recovers must be control
// files beneath one of l's cgroupfs mounts. Pending changes of a previous
// run stay pending until Recover undoes them.
//
// One process at a time may have the journal open: it holds an exclusive
// flock(2) on the journal's directory (the file itself is replaced when
// compacted), so that a second memcgd cannot undo the first one's changes
// while they are in force.
func OpenJournal(path string, l Layout) (*Journal, error) {
	j := &Journal{path: path, mounts: layoutMounts(l), next: 1, pending: make(map[uint64]Change)}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	if err := unix.Flock(int(dir.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		dir.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("open journal %s: in use by another process", path)
		}
		return nil, fmt.Errorf("open journal %s: lock %s: %w", path, dir.Name(), err)
	}
	j.dir = dir
	b, err := os.ReadFile(path)
	if err == nil || errors.Is(err, os.ErrNotExist) {
		j.load(b)
		err = j.compact()
	}
	if err != nil {
		dir.Close()
		return nil, fmt.Errorf("open journal: %w", err)
	}
	return j, nil
}

// layoutMounts lists the mount points of l's hierarchies.
func layoutMounts(l Layout) []string {
	m := []string{l.Memory.Mount}
	for _, h := range []*Hierarchy{l.Unified, l.Freezer} {
		if h != nil && !slices.Contains(m, h.Mount) {
			m = append(m, h.Mount)
		}
	}
	return m
}

// load reads the pending changes from the journal's text. Lines that do not
// parse (a torn last write) and records of files the journal may not write
// are logged and dropped.
func (j *Journal) load(b []byte) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		var e entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.ID == 0 || (!e.Done && e.Change == nil) {
			slog.Warn("journal: ignoring damaged line", "journal", j.path, "line", n, "text", sc.Text())
			continue
		}
		j.next = max(j.next, e.ID+1)
		if e.Done {
			delete(j.pending, e.ID)
			continue
		}
		if err := j.check(e.Path); err != nil {
			slog.Warn("journal: ignoring change", "journal", j.path, "line", n, "err", err)
			continue
		}
		j.pending[e.ID] = *e.Change
	}
}

// check verifies that p is a control file the journal may write: a clean
// absolute path beneath one of the cgroupfs mounts, naming one of the files
// memcgd changes.
func (j *Journal) check(p string) error {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return fmt.Errorf("change path %q: want a clean absolute path", p)
	}
	if !slices.ContainsFunc(j.mounts, func(m string) bool { return strings.HasPrefix(p, m+"/") }) {
		return fmt.Errorf("change path %q: want a file beneath a cgroupfs mount %v", p, j.mounts)
	}
	switch filepath.Base(p) {
	case fileLimitV1, fileHigh, fileMax, fileFreeze, fileFreezerV1:
		return nil
	}
	return fmt.Errorf("change path %q: want one of %s, %s, %s, %s, %s", p,
		fileLimitV1, fileHigh, fileMax, fileFreeze, fileFreezerV1)
}

// Record writes c to the journal and syncs it to disk; only then may the
// caller make the change. It returns the id to pass to Done once the
// change is undone. A file with a change still pending is refused with
// ErrChangePending.
func (j *Journal) Record(c Change) (uint64, error) {
	if err := j.check(c.Path); err != nil {
		return 0, fmt.Errorf("journal %s: record: %w", j.path, err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, p := range j.pending {
		if p.Path == c.Path {
			return 0, fmt.Errorf("journal %s: record %s: %w", j.path, c.Path, ErrChangePending)
		}
	}
	id := j.next
	if err := j.append(entry{ID: id, Change: &c}, true); err != nil {
		return 0, fmt.Errorf("journal %s: record %s: %w", j.path, c.Path, err)
	}
	j.next++
	j.pending[id] = c
	return id, nil
}

// Done notes that change id has been undone. The note is not synced: if it
// is lost in a crash, Recover finds the change already undone, which it
// checks before writing, and the next Record's sync makes it durable
// anyway. That keeps a pause or a squeeze to one disk flush.
func (j *Journal) Done(id uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.done(id)
}

func (j *Journal) done(id uint64) error {
	if _, ok := j.pending[id]; !ok {
		return fmt.Errorf("journal %s: done %d: no such pending change", j.path, id)
	}
	if err := j.append(entry{ID: id, Done: true}, false); err != nil {
		return fmt.Errorf("journal %s: done %d: %w", j.path, id, err)
	}
	delete(j.pending, id)
	if len(j.pending) == 0 && j.lines >= compactLines {
		if err := j.compact(); err != nil {
			return fmt.Errorf("journal %s: %w", j.path, err)
		}
	}
	return nil
}

// Pending returns the changes not yet undone, oldest first.
func (j *Journal) Pending() []Change {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []Change
	for _, id := range j.pendingIDs() {
		out = append(out, j.pending[id])
	}
	return out
}

func (j *Journal) pendingIDs() []uint64 {
	ids := make([]uint64, 0, len(j.pending))
	for id := range j.pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Recover undoes the changes a previous run left pending, newest first,
// and returns those it had to write back. A change whose cgroup has gone
// is dropped with a log line; a change already undone (the limit is no
// longer below its original, the cgroup is not frozen) is dropped
// silently. Changes that fail otherwise stay pending and are reported in
// err. Run it at start-up, before any new change.
func (j *Journal) Recover(ctx context.Context) (undone []Change, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var errs []error
	ids := j.pendingIDs()
	for _, id := range slices.Backward(ids) {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		c := j.pending[id]
		wrote, err := undo(c)
		switch {
		case errors.Is(err, host.ErrVanished):
			slog.InfoContext(ctx, "journal: cgroup gone, nothing to undo", "change", c.String())
		case err != nil:
			errs = append(errs, fmt.Errorf("journal %s: undo %s: %w", j.path, c, err))
			continue
		case wrote:
			slog.InfoContext(ctx, "journal: undid change left by a previous run", "change", c.String())
			undone = append(undone, c)
		}
		if err := j.done(id); err != nil {
			errs = append(errs, err)
		}
	}
	return undone, errors.Join(errs...)
}

// undo puts c's original value back if the file still shows the change,
// and reports whether it wrote.
func undo(c Change) (bool, error) {
	cur, err := readControl(c.Path)
	if err != nil {
		return false, err
	}
	var changed bool
	switch filepath.Base(c.Path) {
	case fileLimitV1, fileHigh, fileMax:
		// memcgd only lowers limits; one at or above the original was
		// restored already, or raised since by someone else.
		orig, err := format.ParseLimit([]byte(c.Original))
		if err != nil {
			return false, fmt.Errorf("original: %w", err)
		}
		now, err := format.ParseLimit([]byte(cur))
		if err != nil {
			return false, fmt.Errorf("read %s: %w", c.Path, err)
		}
		changed = now < orig
	case fileFreeze, fileFreezerV1:
		changed = cur != c.Original
	}
	if !changed {
		return false, nil
	}
	return true, writeControl(c.Path, c.Original)
}

// append writes e as one line, and syncs the file when sync is set.
func (j *Journal) append(e entry, sync bool) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return err
	}
	j.lines++
	if sync {
		return j.f.Sync()
	}
	return nil
}

// compact rewrites the journal with only the pending changes: a temporary
// file written and synced, renamed over the journal, the directory synced.
// The file is then reopened for appending.
func (j *Journal) compact() error {
	var buf bytes.Buffer
	ids := j.pendingIDs()
	for _, id := range ids {
		c := j.pending[id]
		b, err := json.Marshal(entry{ID: id, Change: &c})
		if err != nil {
			return err
		}
		buf.Write(append(b, '\n'))
	}
	if err := atomicfile.Write(j.path, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	if j.f != nil {
		j.f.Close()
	}
	j.f, j.lines = f, len(ids)
	return nil
}

// Close closes the journal file and releases its lock. Pending changes
// stay in it for the next run's Recover.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	err := j.f.Close()
	if derr := j.dir.Close(); err == nil {
		err = derr
	}
	if err != nil {
		return fmt.Errorf("close journal %s: %w", j.path, err)
	}
	return nil
}

// begin records a change to the control file p with its current value as
// the original. It reads p again after the record is synced: if another
// change slipped in between (one that went round the journal, or one that
// was undone just before ours was recorded), the value read first is not
// the original, and begin gives up rather than record it.
func (j *Journal) begin(p string) (id uint64, original string, err error) {
	original, err = readControl(p)
	if err != nil {
		return 0, "", err
	}
	id, err = j.Record(Change{Path: p, Original: original})
	if err != nil {
		return 0, "", err
	}
	again, err := readControl(p)
	if err == nil && again != original {
		err = fmt.Errorf("%s changed from %q to %q while being recorded", p, original, again)
	}
	if err != nil {
		return 0, "", errors.Join(err, j.Done(id))
	}
	return id, original, nil
}

// readControl reads a cgroupfs control file and returns its content
// without the trailing newline. A missing cgroup is host.ErrVanished.
func readControl(p string) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", p, vanished(err))
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}

// readUint reads a single-number control file such as memory.current.
func readUint(p string) (uint64, error) {
	s, err := readControl(p)
	if err != nil {
		return 0, err
	}
	v, err := format.ParseUint([]byte(s))
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", p, err)
	}
	return v, nil
}

// writeControl writes value to a cgroupfs control file in one write(2),
// after checking with fstatfs that the open file is on cgroupfs (v1 or
// v2), so that no path, however it was made, gets memcgd to write
// elsewhere. A missing cgroup is host.ErrVanished; the kernel's own errors
// (EBUSY, EAGAIN, EINVAL) are wrapped for errors.Is.
func writeControl(p, value string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("write %s: %w", p, vanished(err))
	}
	defer f.Close()
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("write %s: statfs: %w", p, err)
	}
	if st.Type != unix.CGROUP_SUPER_MAGIC && st.Type != unix.CGROUP2_SUPER_MAGIC {
		return fmt.Errorf("write %s: not on cgroupfs (filesystem magic %#x); refusing to write", p, st.Type)
	}
	// os.File.Write retries EINTR itself, so a signal (the Go runtime's
	// preemption signal included) restarts the write.
	if _, err := f.WriteString(value); err != nil {
		return fmt.Errorf("write %q to %s: %w", value, p, vanished(err))
	}
	return nil
}

// vanished wraps err with host.ErrVanished when it says the cgroup is gone:
// ENOENT opening a file of a removed directory, ENODEV using a file whose
// cgroup was removed while it was open (fs/kernfs/file.c).
func vanished(err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("%w: %w", host.ErrVanished, err)
	}
	return err
}
