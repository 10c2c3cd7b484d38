// Package observe reads a memory cgroup's state from cgroupfs into a
// memcg.Stat: usage, limits, memory.stat, memory.events and PSI, on
// cgroup v1 and v2 alike.
//
// Invariants: a Reader allocates nothing per observation in steady state
// (its buffers and parsed structs are reused); a file it keeps open is
// read at offset 0, which regenerates a kernfs file, and is never kept
// longer than a second, so a kept file reads as fresh as a new one. A
// Reader is not safe for concurrent use.
package observe

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/format"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// Reader reads memory cgroups' state from cgroupfs. It keeps its buffers
// and parsed structs between calls so that observing a cgroup allocates
// nothing in steady state. A Reader is not safe for concurrent use; give
// each goroutine its own.
type Reader struct {
	layout layout.Layout
	// path holds the NUL-terminated path of the file being read.
	path []byte
	// buf holds the file's contents; it grows to the largest file read.
	buf []byte

	// kept holds files open between reads (KeepFilesOpen); nil opens
	// and closes every file per read.
	kept *keptFiles
	// dirs are the parent directories files are opened from
	// (OpenFromParents): the memory hierarchy's, and the unified one's
	// on a hybrid host; nil opens every file by its whole path.
	dirs *[2]parentDir

	statV1 format.MemoryStatV1
	statV2 format.MemoryStatV2
	events format.MemoryEvents
	psi    format.PSI
}

// NewReader returns a Reader for the hierarchies of l.
func NewReader(l layout.Layout) *Reader {
	return &Reader{layout: l, path: make([]byte, 0, 256), buf: make([]byte, 8192)}
}

// KeepFilesOpen makes r keep the files it reads open between reads (at
// most a second each), so that reading the same cgroup again costs no
// open. The caller must Close r when done with it.
func (r *Reader) KeepFilesOpen() {
	if r.kept == nil {
		r.kept = &keptFiles{}
	}
}

// OpenFromParents tunes r for reading many cgroups once each, siblings
// in a row (memcgd stat without a daemon): it opens each file relative to
// its cgroup's parent directory, which it keeps open while it reads that
// directory's children (at most a second). The caller must Close r when
// done with it.
func (r *Reader) OpenFromParents() {
	if r.dirs == nil {
		r.dirs = new([2]parentDir)
	}
}

// Close closes the files and directories r keeps open. r may be used
// again.
func (r *Reader) Close() {
	if r.kept != nil {
		r.kept.close()
	}
	if r.dirs != nil {
		r.dirs[0].close()
		r.dirs[1].close()
	}
}

// Observe reads the state of cg: from memory.usage_in_bytes,
// memory.limit_in_bytes, memory.stat (its hierarchical total_* figures)
// and memory.failcnt on v1, or memory.current, memory.max, memory.high,
// memory.stat and memory.events on v2; and the cgroup's memory PSI, which
// on a hybrid host is that of the unified cgroup at the same path, when it
// exists. If cg is removed meanwhile the error wraps host.ErrVanished.
//
// The v2 root cgroup has only memory.stat and memory.pressure of these
// (memory_files[]: CFTYPE_NOT_ON_ROOT): the root's own pages are never
// charged (mm/memcontrol.c, try_charge returns early for the root), so its
// page counter holds only its descendants' charges, and it has no limit
// or events. For it Observe reports Limit, Max and High as NoLimit, no
// events, and as Usage the anon + file of its memory.stat: the anonymous
// and page cache pages of the whole machine, which memory.stat counts for
// the root as for any cgroup, and the kernel's own definition of the
// root's usage on v1
// (mm/memcontrol.c, mm/memcontrol-v1.c in newer kernels: mem_cgroup_usage
// reads NR_FILE_PAGES + NR_ANON_MAPPED for the root), so that the root
// reads alike on both versions. Kernel memory is left out, as on v1. On a
// kernel without the root's memory.stat Usage stays 0. FS replaces the
// root's Limit and Usage with the machine's, from /proc/meminfo.
func (r *Reader) Observe(cg host.Cgroup) (memcg.Stat, error) {
	var s memcg.Stat
	var err error
	if r.layout.Memory.Version == layout.V2 {
		err = r.observeV2(cg, &s)
	} else {
		err = r.observeV1(cg, &s)
	}
	if err != nil {
		return memcg.Stat{}, err
	}
	if err := r.observePressure(cg, &s.Pressure); err != nil {
		return memcg.Stat{}, err
	}
	return s, nil
}

func (r *Reader) observeV1(cg host.Cgroup, s *memcg.Stat) error {
	h := r.layout.Memory
	var err error
	if s.Usage, err = r.ReadUint(h, cg, "memory.usage_in_bytes"); err != nil {
		return err
	}
	if s.Limit, err = r.readLimit(h, cg, "memory.limit_in_bytes"); err != nil {
		return err
	}
	s.Max, s.High = s.Limit, memcg.NoLimit
	if s.Counters.Failcnt, err = r.ReadUint(h, cg, "memory.failcnt"); err != nil {
		return err
	}
	s.Counters.HasFailcnt = true

	b, err := r.read(h, cg, "memory.stat")
	if err != nil {
		return err
	}
	if err := format.ParseMemoryStatV1(b, &r.statV1); err != nil {
		return r.parseError(h, cg, "memory.stat", err)
	}
	// The total_* figures include the descendants, as v2's do: a cgroup's
	// limit covers its subtree.
	t := &r.statV1.Total
	s.File, s.ActiveFile, s.InactiveFile = t.Cache, t.ActiveFile, t.InactiveFile
	s.Anon = t.RSS
	s.Dirty, s.Writeback = t.Dirty, t.Writeback
	s.Counters.HasPgpg = true
	s.Counters.Pgpgin, s.Counters.Pgpgout = t.Pgpgin, t.Pgpgout
	return nil
}

func (r *Reader) observeV2(cg host.Cgroup, s *memcg.Stat) error {
	h := r.layout.Memory
	s.Limit, s.Max, s.High = memcg.NoLimit, memcg.NoLimit, memcg.NoLimit
	// The root cgroup has no memory.current, memory.max, memory.high or
	// memory.events (mm/memcontrol.c, memory_files[]: CFTYPE_NOT_ON_ROOT),
	// and older kernels no memory.stat there either. The top of the mount
	// cannot vanish, so a file missing there is a file the kernel does not
	// offer.
	top := string(cg) == h.Root
	absent := func(err error) bool { return top && errors.Is(err, host.ErrVanished) }

	usage, err := r.ReadUint(h, cg, "memory.current")
	root := absent(err)
	switch {
	case root:
	case err != nil:
		return err
	default:
		s.Usage = usage
		if s.Max, err = r.readLimit(h, cg, "memory.max"); err != nil {
			return err
		}
		if s.High, err = r.readLimit(h, cg, "memory.high"); err != nil {
			return err
		}
		s.Limit = min(s.Max, s.High)
		b, err := r.read(h, cg, "memory.events")
		if err != nil {
			return err
		}
		if err := format.ParseMemoryEvents(b, &r.events); err != nil {
			return r.parseError(h, cg, "memory.events", err)
		}
		e, c := &r.events, &s.Counters
		c.HasEvents = true
		c.EventsLow, c.EventsHigh, c.EventsMax, c.EventsOOM, c.EventsOOMKill = e.Low, e.High, e.Max, e.OOM, e.OOMKill
	}

	b, err := r.read(h, cg, "memory.stat")
	if absent(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := format.ParseMemoryStatV2(b, &r.statV2); err != nil {
		return r.parseError(h, cg, "memory.stat", err)
	}
	m, c := &r.statV2, &s.Counters
	s.File, s.ActiveFile, s.InactiveFile = m.File, m.ActiveFile, m.InactiveFile
	s.Anon = m.Anon
	s.Dirty, s.Writeback = m.FileDirty, m.FileWriteback
	c.HasReclaim = m.HasReclaim
	c.PgscanKswapd, c.PgscanDirect = m.PgscanKswapd, m.PgscanDirect
	c.PgstealKswapd, c.PgstealDirect = m.PgstealKswapd, m.PgstealDirect
	c.Pgrefill = m.Pgrefill
	if root {
		// See Observe: the root's usage as v1 defines it.
		s.Usage = m.Anon + m.File
	}
	return nil
}

// observePressure reads the memory PSI of cg. It is absent, not an error,
// when the host has no unified cgroup at cg's path or PSI is off (the
// psi=0 boot option makes the file fail with EOPNOTSUPP).
func (r *Reader) observePressure(cg host.Cgroup, p *memcg.Pressure) error {
	h := r.layout.Memory
	if h.Version == layout.V1 {
		if r.layout.Unified == nil {
			return nil
		}
		h = *r.layout.Unified
	}
	b, err := r.readFile(h, cg, "memory.pressure")
	switch {
	case err == nil:
	case h.Version != r.layout.Memory.Version && ctlfile.IsVanished(err):
		return nil // no unified cgroup mirrors this v1 cgroup
	case errors.Is(err, syscall.EOPNOTSUPP):
		return nil
	default:
		return r.readError(h, cg, err)
	}
	if err := format.ParsePSI(b, &r.psi); err != nil {
		return r.parseError(h, cg, "memory.pressure", err)
	}
	*p = memcg.Pressure{
		Has:       true,
		SomeTotal: r.psi.Some.Total,
		FullTotal: r.psi.Full.Total,
		SomeAvg10: r.psi.Some.Avg10,
	}
	return nil
}

// ReadUint reads the single-number file name of cg's directory in h, as
// Observe reads its files (kept open with KeepFilesOpen).
func (r *Reader) ReadUint(h layout.Hierarchy, cg host.Cgroup, name string) (uint64, error) {
	b, err := r.read(h, cg, name)
	if err != nil {
		return 0, err
	}
	v, err := format.ParseUint(b)
	if err != nil {
		return 0, r.parseError(h, cg, name, err)
	}
	return v, nil
}

func (r *Reader) readLimit(h layout.Hierarchy, cg host.Cgroup, name string) (uint64, error) {
	b, err := r.read(h, cg, name)
	if err != nil {
		return 0, err
	}
	v, err := format.ParseLimit(b)
	if err != nil {
		return 0, r.parseError(h, cg, name, err)
	}
	return v, nil
}

func (r *Reader) parseError(h layout.Hierarchy, cg host.Cgroup, name string, err error) error {
	return fmt.Errorf("observe %s: %s/%s: %w", cg, h.Dir(cg), name, err)
}

// read returns the contents of the file name in cg's directory of h, in
// r.buf, valid until the next read. It opens, reads and closes the file
// through system calls on a reused NUL-terminated path, since os.Open and
// the string-taking wrappers of x/sys/unix allocate on every call; with
// KeepFilesOpen it reads the file kept open instead, and keeps the one it
// opens. A kept file that fails (its cgroup removed) is closed and the
// path opened again.
func (r *Reader) read(h layout.Hierarchy, cg host.Cgroup, name string) ([]byte, error) {
	b, err := r.readFile(h, cg, name)
	if err != nil {
		return nil, r.readError(h, cg, err)
	}
	return b, nil
}

// readError puts readFile's bare error of cg's file in h in context.
func (r *Reader) readError(h layout.Hierarchy, cg host.Cgroup, err error) error {
	if err == errOutside {
		return fmt.Errorf("observe %s: outside the mounted subtree %s of %s", cg, h.Root, h.Mount)
	}
	return r.fileError(cg, err)
}

// open opens r.path, a file of h, from its parent directory with
// OpenFromParents, else by its whole path.
func (r *Reader) open(h layout.Hierarchy) (int, error) {
	if r.dirs == nil {
		return ctlfile.OpenRead(r.path)
	}
	d := &r.dirs[0]
	if h.Mount != r.layout.Memory.Mount {
		d = &r.dirs[1]
	}
	return d.open(r.path, len(h.Mount))
}

// errOutside is readFile's error for a cgroup outside the mounted subtree.
var errOutside = errors.New("outside the mounted subtree")

// readFile is read with its errors bare: errOutside, or the failed system
// call's errno, so that a caller expecting one (observePressure) spares
// formatting an error it drops.
func (r *Reader) readFile(h layout.Hierarchy, cg host.Cgroup, name string) ([]byte, error) {
	if !r.setPath(h, cg, name) {
		return nil, errOutside
	}
	if r.kept != nil {
		if fd, ok := r.kept.get(r.path); ok {
			if b, err := ctlfile.PreadRecord(fd, &r.buf); err == nil {
				return b, nil
			}
			r.kept.drop(r.path)
		}
	}
	fd, err := r.open(h)
	if err != nil {
		return nil, err
	}
	b, err := ctlfile.PreadRecord(fd, &r.buf)
	if err != nil || r.kept == nil {
		unix.Close(fd)
	} else {
		r.kept.put(r.path, fd)
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

func (r *Reader) fileError(cg host.Cgroup, err error) error {
	p := string(r.path[:len(r.path)-1])
	if ctlfile.IsVanished(err) {
		return fmt.Errorf("observe %s: %s: %w: %w", cg, p, host.ErrVanished, err)
	}
	return fmt.Errorf("observe %s: %s: %w", cg, p, err)
}

// setPath sets r.path to the NUL-terminated path of cg's file name in h,
// as h.Dir would, without allocating. It reports false when cg is outside
// the mounted subtree.
func (r *Reader) setPath(h layout.Hierarchy, cg host.Cgroup, name string) bool {
	c := string(cg)
	if !cleanAbs(c) {
		// An odd spelling, such as a trailing slash: let Dir clean it.
		d := h.Dir(cg)
		if d == "" {
			return false
		}
		r.path = append(append(append(append(r.path[:0], d...), '/'), name...), 0)
		return true
	}
	var rel string
	switch {
	case h.Root == "/":
		rel = c
	case c == h.Root:
		rel = ""
	case strings.HasPrefix(c, h.Root) && c[len(h.Root)] == '/':
		rel = c[len(h.Root):]
	default:
		return false
	}
	p := append(r.path[:0], h.Mount...)
	if rel != "/" {
		p = append(p, rel...)
	}
	r.path = append(append(append(p, '/'), name...), 0)
	return true
}

// cleanAbs reports whether p is absolute and already clean: no empty, "."
// or ".." elements and no trailing slash but for the root.
func cleanAbs(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	if p == "/" {
		return true
	}
	start := 1
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		if elem := p[start:i]; elem == "" || elem == "." || elem == ".." {
			return false
		}
		start = i + 1
	}
	return true
}
