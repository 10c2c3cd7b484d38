// Package overrides holds the knob settings made at run time (`memcgd set`)
// per cgroup, over those of the configuration, and the file they persist
// to, so that a restarted daemon and `memcgd stat` see the same settings.
package overrides

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/memcgd/memcgd/atomicfile"
	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// DefaultPath is where the daemon keeps the overrides set by `memcgd set`,
// so that they survive a restart.
const DefaultPath = "/var/lib/memcgd/overrides.json"

// version is the file format version Overrides reads and writes.
const version = 1

// Identify returns the identity of a cgroup instance: the inode number of
// its cgroupfs directory. It returns an error wrapping os.ErrNotExist when
// the cgroup does not exist.
//
// Why the directory inode: overrides are set on a running cgroup, and a
// cgroup removed and created again under the same name (a restarted pod, a
// re-created systemd scope) is another tenant's or another workload's, which
// must not inherit them. cgroupfs is kernfs on v1 and v2; kernfs numbers
// its nodes with idr_alloc_cyclic (fs/kernfs/dir.c, __kernfs_new_node), so
// a new directory gets a new number rather than the freed one, and on v2
// that number is the cgroup id (kernel/cgroup/cgroup.c, cgroup_id). The
// same name with another number is therefore another cgroup. The price: a
// reboot recreates every cgroup, so runtime overrides do not survive it;
// settings meant to outlive a cgroup belong in the config's rules.
type Identify func(cg host.Cgroup) (uint64, error)

// DirInode returns an Identify that stats the directory dir(cg).
func DirInode(dir func(host.Cgroup) string) Identify {
	return func(cg host.Cgroup) (uint64, error) {
		fi, err := os.Stat(dir(cg))
		if err != nil {
			return 0, fmt.Errorf("identify cgroup %s: %w", cg, err)
		}
		return inode(fi), nil
	}
}

// Overrides are knob settings made at run time, per cgroup instance, over
// those of the configuration. Every change is written to the file before it
// takes effect, so a restarted daemon applies the same settings; a change
// that cannot be written does not take effect. Safe for concurrent use.
//
// A cgroup's overrides never hold both halves of a ratio/bytes pair:
// setting one drops the other, as the kernel's vm.dirty_* handlers zero the
// twin (mm/page-writeback.c, dirty_ratio_handler and dirty_bytes_handler).
type Overrides struct {
	path     string
	identify Identify

	mu    sync.Mutex
	m     map[host.Cgroup]entry // replaced, never changed in place
	stale []host.Cgroup         // dropped at load: removed or recreated
}

// entry is one cgroup's overrides and the identity of the cgroup instance
// they were set on, 0 when unknown.
type entry struct {
	patch memcg.Patch
	id    uint64
}

// Load reads the overrides file at path; a missing file holds no overrides.
// With path "" the overrides live in memory only. With identify, entries of
// cgroups that no longer exist, or exist as another instance (see
// Identify), are dropped (Stale lists them) and every Set records the
// cgroup's identity; with nil, cgroups are taken by name.
func Load(path string, identify Identify) (*Overrides, error) {
	o := &Overrides{path: path, identify: identify, m: map[host.Cgroup]entry{}}
	if path == "" {
		return o, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return o, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load overrides: %w", err)
	}
	m, err := parse(b)
	if err != nil {
		return nil, fmt.Errorf("load overrides %s: %w", path, err)
	}
	if identify != nil {
		for _, cg := range slices.Sorted(maps.Keys(m)) {
			e := m[cg]
			id, err := identify(cg)
			switch {
			case errors.Is(err, os.ErrNotExist), err == nil && e.id != 0 && id != e.id:
				delete(m, cg)
				o.stale = append(o.stale, cg)
			case err == nil:
				e.id = id
				m[cg] = e
			}
			// Any other error (EACCES, EIO) cannot tell: keep the entry.
		}
	}
	o.m = m
	return o, nil
}

// Path is the file the overrides persist to, "" if none.
func (o *Overrides) Path() string { return o.path }

// Stale lists the cgroups whose overrides Load dropped because the cgroup
// was gone or had been created again.
func (o *Overrides) Stale() []host.Cgroup { return slices.Clone(o.stale) }

// Set overrides knobs of cg, given as name=value as memcg.Knobs.Apply
// takes them, all or nothing: a bad name or value, or both halves of a
// ratio/bytes pair, changes nothing. The new overrides are written to the
// file before they take effect; if writing fails, the previous ones stay.
func (o *Overrides) Set(cg host.Cgroup, knobs map[string]string) error {
	if _, err := host.ParseCgroup(string(cg)); err != nil {
		return err
	}
	if !cg.Valid() {
		// encoding/json would store U+FFFD for the bad bytes: the entry
		// would come back under another name.
		return fmt.Errorf("cgroup: invalid value %q: allowed a name in UTF-8 for a persisted override; use a config rule", cg)
	}
	if len(knobs) == 0 {
		return fmt.Errorf("overrides of %s: no knobs given: want name=value pairs, names from %s", cg, strings.Join(memcg.KnobNames(), ", "))
	}
	p, err := memcg.ParsePatch(knobs)
	if err != nil {
		return err
	}
	var id uint64
	if o.identify != nil {
		if id, err = o.identify(cg); err != nil {
			return fmt.Errorf("overrides of %s: %w", cg, err)
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	old := o.m[cg]
	if old.id != id {
		old = entry{} // another instance's leftovers: start afresh
	}
	m := maps.Clone(o.m)
	m[cg] = entry{patch: old.patch.Merge(p), id: id}
	if err := o.persist(m); err != nil {
		return err
	}
	o.m = m
	return nil
}

// Get returns cg's overrides in the text form memcg.Knobs.Get prints,
// empty if it has none.
func (o *Overrides) Get(cg host.Cgroup) map[string]string {
	return o.Patch(cg).Strings()
}

// Patch returns cg's overrides.
func (o *Overrides) Patch(cg host.Cgroup) memcg.Patch {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.m[cg].patch
}

// Cgroups lists the cgroups that have overrides, sorted.
func (o *Overrides) Cgroups() []host.Cgroup {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Sorted(maps.Keys(o.m))
}

// Apply returns k with cg's overrides applied over it; a nil Overrides
// has none.
func (o *Overrides) Apply(cg host.Cgroup, k memcg.Knobs) memcg.Knobs {
	if o == nil {
		return k
	}
	return o.Patch(cg).Apply(k)
}

// Delete drops cg's overrides, so the configuration's knobs apply again.
func (o *Overrides) Delete(cg host.Cgroup) error {
	return o.drop(cg, func(entry) bool { return true })
}

// Forget drops cg's overrides if the cgroup instance they were set on is
// gone: the agent calls it when it sees cg vanish. When cg exists again as
// the same instance (a false alarm) they are kept; when it exists as a new
// instance, or not at all, they are dropped, so that a cgroup created later
// under the same name starts from the configuration.
func (o *Overrides) Forget(cg host.Cgroup) error {
	return o.drop(cg, func(e entry) bool {
		if o.identify == nil {
			return true
		}
		id, err := o.identify(cg)
		return errors.Is(err, os.ErrNotExist) || err == nil && id != e.id
	})
}

// drop deletes cg's entry when it has one and gone says so, and persists.
func (o *Overrides) drop(cg host.Cgroup, gone func(entry) bool) error {
	o.mu.Lock()
	e, ok := o.m[cg]
	o.mu.Unlock()
	if !ok || !gone(e) { // identify stats outside the lock
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if cur, ok := o.m[cg]; !ok || cur != e {
		return nil // changed meanwhile: a Set on the new instance wins
	}
	m := maps.Clone(o.m)
	delete(m, cg)
	if err := o.persist(m); err != nil {
		return err
	}
	o.m = m
	return nil
}

// Reset drops every cgroup's overrides.
func (o *Overrides) Reset() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := map[host.Cgroup]entry{}
	if err := o.persist(m); err != nil {
		return err
	}
	o.m = m
	return nil
}

// fileJSON is the file's shape. IDs is absent from files written before
// identities were recorded, and from files whose cgroups have none.
type fileJSON struct {
	Version int                          `json:"version"`
	Cgroups map[string]map[string]string `json:"cgroups"`
	IDs     map[string]uint64            `json:"ids,omitempty"`
}

// persist writes m to the file atomically: a temporary file in the same
// directory, synced, renamed over the old one, and the directory synced,
// so a crash leaves the old file or the new one, never a torn one.
func (o *Overrides) persist(m map[host.Cgroup]entry) error {
	if o.path == "" {
		return nil
	}
	f := fileJSON{Version: version, Cgroups: map[string]map[string]string{}}
	for cg, e := range m {
		f.Cgroups[string(cg)] = e.patch.Strings()
		if e.id != 0 {
			if f.IDs == nil {
				f.IDs = map[string]uint64{}
			}
			f.IDs[string(cg)] = e.id
		}
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("save overrides: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(o.path), 0o700); err != nil {
		return fmt.Errorf("save overrides: %w", err)
	}
	if err := atomicfile.Write(o.path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("save overrides: %w", err)
	}
	return nil
}
