// Package journal is memcgd's undo journal: every stateful change to a
// cgroupfs control file (a lowered v1 limit, a frozen cgroup) is recorded
// before it is made and marked done after it is undone, so that a crash
// never leaves one behind; Recover undoes what a previous run left
// pending. Journal.Apply is the one way memcgd changes a control file.
//
// Invariants: a change is in the journal before its write; the journal
// accepts only the control files named by the File* constants, beneath
// the layout's cgroupfs mounts; one control file has at most one change
// pending; Recover writes an original back only where the cgroup is the
// one changed, in this boot, and the file still holds memcgd's value. One
// process at a time holds the journal (a flock on its directory).
package journal

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/memcgd/memcgd/atomicfile"
	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
	"golang.org/x/sys/unix"
)

// The control files memcgd changes and must put back. A limit is only
// ever lowered, a cgroup only ever frozen; the journal refuses any other
// file, so a damaged or planted journal cannot make memcgd write
// anywhere else.
const (
	FileLimitV1     = "memory.limit_in_bytes" // v1 hard limit (limit squeeze)
	FileHigh        = "memory.high"           // v2 throttle limit
	FileMax         = "memory.max"            // v2 hard limit
	FileFreeze      = "cgroup.freeze"         // v2 freezer: "1" frozen, "0" thawed
	FileFreezerV1   = "freezer.state"         // v1 freezer: FROZEN, FREEZING, THAWED
	FreezerThawedV1 = "THAWED"
	FreezerFrozenV1 = "FROZEN"
)

// ErrChangePending reports that a control file already has a change in the
// journal that has not been undone. Two changes to one file at a time would
// make the second record the first's value as the original, and undoing
// them could then leave the file changed.
var ErrChangePending = errors.New("control file has a pending change")

// Change is one stateful write to a cgroup control file: the file, the
// value that undoes the write, and what identifies the write as memcgd's
// own when it comes to undoing it.
type Change struct {
	// Path is the control file, for example
	// /sys/fs/cgroup/memory/a/memory.limit_in_bytes.
	Path string `json:"path"`
	// Original is the value the file held before the change, written back
	// to undo it.
	Original string `json:"original"`
	// Wrote is the value memcgd writes. For a limit it is the lowest value
	// the change may write: a squeeze steps the limit down and back up
	// several times under one record, to values at or above
	// Wrote, so any limit in [Wrote, Original) is memcgd's.
	Wrote string `json:"wrote,omitempty"`
	// Cgroup is the inode number of the cgroup's directory (its cgroup
	// id), so that a cgroup removed and created again under the same name
	// is not taken for the one changed.
	Cgroup uint64 `json:"cgroup,omitempty"`
	// Boot is the kernel's boot id when the change was made: cgroups do
	// not survive a reboot, whatever their names.
	Boot string `json:"boot,omitempty"`
}

// String describes the change for logs.
func (c Change) String() string {
	return fmt.Sprintf("%s (original %q, memcgd wrote %q, cgroup %d)", c.Path, c.Original, c.Wrote, c.Cgroup)
}

// identified reports whether c carries what Recover needs to tell the
// change from someone else's: journals written before issue 9 lack it.
func (c Change) identified() bool { return c.Wrote != "" && c.Cgroup != 0 && c.Boot != "" }

// entry is one line of the journal file: a change recorded under ID, or,
// with Done set, the note that change ID has been undone.
type entry struct {
	ID   uint64 `json:"id"`
	Done bool   `json:"done,omitempty"`
	*Change
}

// journalFile is the journal file as Journal uses it: an *os.File opened
// for appending.
type journalFile interface {
	io.Writer
	Truncate(size int64) error
	Close() error
}

// Journal records memcgd's stateful changes to cgroupfs (a lowered limit, a
// frozen cgroup) so that a crash never leaves one behind: a change is
// written to the journal before it is made, marked done after it is
// undone, and Recover undoes whatever a previous run left pending, if the
// cgroup is still the one changed and still holds memcgd's value.
//
// A record is written, not synced. The journal has to outlive the
// daemon, not the kernel: write(2) puts the record in the page cache,
// where the next run reads it after any crash of this one (SIGKILL, a
// panic, the OOM killer), and a kernel crash or power loss reboots, after
// which Recover undoes nothing anyway (every record carries its boot id:
// cgroups do not survive a reboot). An fsync would add nothing but its
// wait: 18 to 180 ms measured under a throttled writer's writeback, the
// writer dirtying 1.5 to 2 GB/s meanwhile, ahead of the freeze.
//
// The file holds JSON lines, appended. A torn last line (a crash during a
// write) is ignored: the change it would have recorded was never made,
// because the change waits for the record's write. A failed append is cut
// off again, so the next record starts on a line of its own. Opening the
// journal rewrites it compacted, through a temporary file and a rename.
//
// A Journal is safe for concurrent use.
type Journal struct {
	path   string
	mounts []string // cgroupfs mounts the journal may write beneath
	boot   string   // this boot's id, recorded with every change

	mu      sync.Mutex
	dir     *os.File // the journal's directory, flock'ed while open
	f       journalFile
	size    int64 // bytes of whole lines in f: where a failed append is cut back to
	stale   bool  // f may differ from pending (a cut failed, a Done was lost): rewrite before the next append
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
// The error when another process holds it names the directory and, from
// /proc/locks, the holder's pid.
func OpenJournal(path string, l layout.Layout) (*Journal, error) {
	boot, err := ctlfile.BootID()
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	j := &Journal{path: path, mounts: layoutMounts(l), boot: boot, next: 1, pending: make(map[uint64]Change)}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	if err := unix.Flock(int(dir.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer dir.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, lockedError(path, dir)
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
func layoutMounts(l layout.Layout) []string {
	m := []string{l.Memory.Mount}
	for _, h := range []*layout.Hierarchy{l.Unified, l.Freezer, l.CPU} {
		if h != nil && !slices.Contains(m, h.Mount) {
			m = append(m, h.Mount)
		}
	}
	return m
}

// load reads the pending changes from the journal's text. Lines that do not
// parse (a torn last write) and records of files the journal may not write
// are logged and dropped. Records written before issue 9 (no Wrote, Cgroup
// or Boot) load as they are; Recover skips them (see there).
func (j *Journal) load(b []byte) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		var e entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.ID == 0 || (!e.Done && e.Change == nil) {
			slog.Warn("journal: ignoring damaged line", "journal", j.path, "line", n, "text", sc.Text())
			continue
		}
		// Ids are never reused, even those of damaged records: a Done
		// line must only ever cancel its own record.
		if e.ID < ^uint64(0) {
			j.next = max(j.next, e.ID+1)
		}
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
	if sc.Err() != nil {
		slog.Warn("journal: ignoring the rest of the file", "journal", j.path, "err", sc.Err())
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
	case FileLimitV1, FileHigh, FileMax, FileFreeze, FileFreezerV1, FileSubtreeControl:
		return nil
	case FileTasksV1, FileThreads:
		if filepath.Base(filepath.Dir(p)) == PaceGroupName {
			return nil
		}
		return fmt.Errorf("change path %q: a thread list is memcgd's only in a %s group", p, PaceGroupName)
	}
	return fmt.Errorf("change path %q: want one of %s, %s, %s, %s, %s, %s, or a %s group's %s or %s", p,
		FileLimitV1, FileHigh, FileMax, FileFreeze, FileFreezerV1, FileSubtreeControl, PaceGroupName, FileTasksV1, FileThreads)
}

// Record writes c to the journal (see Journal: not synced); only then may the
// caller make the change. It returns the id to pass to Done once the
// change is undone. A file with a change still pending is refused with
// ErrChangePending. An empty c.Boot is filled with this boot's id. Recover
// undoes only changes that carry Wrote and Cgroup as well.
//
// An id is used once, also when the append fails: the failed record is cut
// off the file, or the file rewritten from memory before the next append.
func (j *Journal) Record(c Change) (uint64, error) {
	if err := j.check(c.Path); err != nil {
		return 0, fmt.Errorf("journal %s: record: %w", j.path, err)
	}
	if c.Boot == "" {
		c.Boot = j.boot
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, p := range j.pending {
		if p.Path == c.Path {
			return 0, fmt.Errorf("journal %s: record %s: %w", j.path, c.Path, ErrChangePending)
		}
	}
	id := j.next
	j.next++
	if err := j.append(entry{ID: id, Change: &c}); err != nil {
		return 0, fmt.Errorf("journal %s: record %s: %w", j.path, c.Path, err)
	}
	j.pending[id] = c
	return id, nil
}

// Done notes that change id has been undone. Should the note be lost,
// Recover finds the file no longer holding memcgd's value, which it
// checks before writing.
//
// The change stops being pending even when the note cannot be written, so
// that a full disk does not keep memcgd off the file until a restart; the
// journal is then rewritten from memory before its next append.
func (j *Journal) Done(id uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.done(id)
}

func (j *Journal) done(id uint64) error {
	if _, ok := j.pending[id]; !ok {
		return fmt.Errorf("journal %s: done %d: no such pending change", j.path, id)
	}
	delete(j.pending, id)
	if err := j.append(entry{ID: id, Done: true}); err != nil {
		j.stale = true
		return fmt.Errorf("journal %s: done %d: %w", j.path, id, err)
	}
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

// Recover undoes the changes a previous run (or this run, at shutdown)
// left pending, newest first, and returns those it wrote back. It writes
// the original back only when all of these still hold, and otherwise logs
// the change and drops it:
//
//   - the change was made in this boot (Boot is this boot's id);
//   - the cgroup's directory is the one changed (Cgroup is its inode
//     number), not a new cgroup of the same name;
//   - the file still holds memcgd's value (Wrote, or for a limit a value
//     in [Wrote, Original)): one that differs was undone already or set
//     since by someone else, whose value stays.
//
// Records without Boot, Cgroup or Wrote, written by memcgd before these
// were journalled, are skipped with a warning naming the file and the
// original: nothing proves that the cgroup at that path is the one that
// was changed, and writing a stale limit or thawing into a cgroup created
// since is the harm this check exists to prevent (issue 9, defect 6). Such
// records remain only after a crash of that older memcgd; the warning
// lets an operator put the value back by hand.
//
// A change that cannot be undone (the write fails) is logged and dropped:
// it is never a reason to refuse to start. Recover returns an error only
// when ctx ends first; the changes not yet looked at then stay pending.
// Run it at start-up, before any new change, and at shutdown.
func (j *Journal) Recover(ctx context.Context) (undone []Change, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	ids := j.pendingIDs()
	for _, id := range slices.Backward(ids) {
		if err := ctx.Err(); err != nil {
			return undone, fmt.Errorf("journal %s: recover: %w", j.path, err)
		}
		c := j.pending[id]
		wrote, why, err := j.undo(c)
		switch {
		case err != nil:
			slog.ErrorContext(ctx, "journal: cannot undo change; dropping it", "change", c.String(), "err", err)
		case wrote:
			slog.InfoContext(ctx, "journal: undid change", "change", c.String())
			undone = append(undone, c)
		case why != "":
			slog.WarnContext(ctx, "journal: not undoing change", "change", c.String(), "reason", why)
		}
		if err := j.done(id); err != nil {
			slog.WarnContext(ctx, "journal: cannot note change as undone", "err", err)
		}
	}
	return undone, nil
}

// undo puts c's original value back if c is still in force, and reports
// whether it wrote; if not, why says why not, unless there is nothing to
// say (the change was undone already).
func (j *Journal) undo(c Change) (wrote bool, why string, err error) {
	if !c.identified() {
		return false, "recorded without the cgroup's identity by an older memcgd; " +
			"check the file and write the original back by hand if it is still memcgd's", nil
	}
	if c.Boot != j.boot {
		return false, fmt.Sprintf("made in an earlier boot (%s)", c.Boot), nil
	}
	switch filepath.Base(c.Path) {
	case FileTasksV1, FileThreads:
		return undoPaceGroup(c)
	case FileSubtreeControl:
		return undoSubtreeControl(c)
	}
	ino, err := ctlfile.FileIno(c.Path)
	if errors.Is(err, host.ErrVanished) {
		return false, "cgroup gone", nil
	}
	if err != nil {
		return false, "", err
	}
	if ino != c.Cgroup {
		return false, fmt.Sprintf("cgroup removed and created again (inode %d, recorded %d)", ino, c.Cgroup), nil
	}
	cur, err := ctlfile.Read(c.Path)
	if errors.Is(err, host.ErrVanished) {
		return false, "cgroup gone", nil
	}
	if err != nil {
		return false, "", err
	}
	ours, err := heldByUs(c, cur)
	if err != nil {
		return false, "", err
	}
	if !ours {
		if sameValue(c.Path, cur, c.Original) {
			if isAnchor(c) {
				return false, "", removeAnchor(c.Path)
			}
			return false, "", nil // undone already
		}
		return false, fmt.Sprintf("changed since by another writer to %q", cur), nil
	}
	if err := ctlfile.Write(c.Path, c.Original); err != nil {
		return false, "", err
	}
	if isAnchor(c) {
		return true, "", removeAnchor(c.Path)
	}
	return true, "", nil
}

// append writes e as one line. A failed or short write is cut off the
// file again, so that the next line starts clean; if even that fails, the
// file is rewritten from memory before the next append.
func (j *Journal) append(e entry) error {
	if j.stale {
		if err := j.compact(); err != nil {
			return err
		}
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	n, err := j.f.Write(append(b, '\n'))
	if err == nil && n < len(b)+1 {
		err = io.ErrShortWrite
	}
	if err != nil {
		if terr := j.f.Truncate(j.size); terr != nil {
			j.stale = true
			err = errors.Join(err, fmt.Errorf("cut the failed record off: %w", terr))
		}
		return err
	}
	j.size += int64(n)
	j.lines++
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
	j.f, j.lines, j.size, j.stale = f, len(ids), int64(buf.Len()), false
	return nil
}

// Path is the journal's file.
func (j *Journal) Path() string { return j.path }

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
