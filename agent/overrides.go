package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/memcgd/memcgd/atomicfile"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// DefaultOverridesPath is where the daemon keeps the overrides set by
// `memcgd set`, so that they survive a restart.
const DefaultOverridesPath = "/var/lib/memcgd/overrides.json"

// overridesVersion is the file format version Overrides reads and writes.
const overridesVersion = 1

// Overrides are knob settings made at run time (`memcgd set`), per cgroup,
// over those of the configuration. Every change is written to a file before
// it takes effect, so a restarted daemon applies the same settings; a
// change that cannot be written does not take effect. Safe for concurrent
// use.
//
// A cgroup's stored overrides never hold both halves of a ratio/bytes pair:
// setting one drops the other, as the kernel's vm.dirty_* handlers zero the
// twin (mm/page-writeback.c, dirty_ratio_handler and dirty_bytes_handler).
// Values are stored in the text form memcg.Knobs.Get prints.
type Overrides struct {
	path string

	mu sync.Mutex
	m  map[host.Cgroup]map[string]string
}

// LoadOverrides reads the overrides file at path; a missing file holds no
// overrides. With path "" the overrides live in memory only.
func LoadOverrides(path string) (*Overrides, error) {
	o := &Overrides{path: path, m: map[host.Cgroup]map[string]string{}}
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
	m, err := parseOverrides(b)
	if err != nil {
		var pe *parseError
		if errors.As(err, &pe) {
			line, col := position(b, pe.offset)
			return nil, fmt.Errorf("load overrides %s: line %d, column %d (offset %d): %w", path, line, col, pe.offset, pe.err)
		}
		return nil, fmt.Errorf("load overrides %s: %w", path, err)
	}
	o.m = m
	return o, nil
}

// Path is the file the overrides persist to, "" if none.
func (o *Overrides) Path() string { return o.path }

// Set overrides knobs of cg, given as name=value as memcg.Knobs.Apply
// takes them, all or nothing: a bad name or value, or both halves of a
// ratio/bytes pair, changes nothing. The new overrides are written to the
// file before they take effect; if writing fails, the previous ones stay.
func (o *Overrides) Set(cg host.Cgroup, knobs map[string]string) error {
	if err := checkCgroup(cg); err != nil {
		return err
	}
	if len(knobs) == 0 {
		return fmt.Errorf("overrides of %s: no knobs given: want name=value pairs, names from %s", cg, strings.Join(memcg.KnobNames(), ", "))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	next, err := merge(o.m[cg], knobs)
	if err != nil {
		return err
	}
	m := maps.Clone(o.m)
	m[cg] = next
	if err := o.persist(m); err != nil {
		return err
	}
	o.m = m
	return nil
}

// merge returns old with knobs applied: each value canonical, and a ratio
// replacing its bytes twin and the reverse.
func merge(old, knobs map[string]string) (map[string]string, error) {
	// Apply checks names, values and pairs against any starting knobs
	// alike; the defaults are as good as the cgroup's own.
	k := memcg.DefaultKnobs()
	if err := k.Apply(knobs); err != nil {
		return nil, err
	}
	next := maps.Clone(old)
	if next == nil {
		next = map[string]string{}
	}
	for name := range knobs {
		if t := twin(name); t != "" {
			delete(next, t)
		}
		v, err := k.Get(name)
		if err != nil {
			return nil, err
		}
		next[name] = v
	}
	return next, nil
}

// twin is the other half of a ratio/bytes pair, "" for an unpaired knob.
func twin(name string) string {
	switch name {
	case memcg.KnobDirtyRatio:
		return memcg.KnobDirtyBytes
	case memcg.KnobDirtyBytes:
		return memcg.KnobDirtyRatio
	case memcg.KnobDirtyBackgroundRatio:
		return memcg.KnobDirtyBackgroundBytes
	case memcg.KnobDirtyBackgroundBytes:
		return memcg.KnobDirtyBackgroundRatio
	}
	return ""
}

// Get returns a copy of cg's overrides, empty if it has none.
func (o *Overrides) Get(cg host.Cgroup) map[string]string {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := maps.Clone(o.m[cg])
	if m == nil {
		m = map[string]string{}
	}
	return m
}

// Cgroups lists the cgroups that have overrides, sorted.
func (o *Overrides) Cgroups() []host.Cgroup {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Sorted(maps.Keys(o.m))
}

// Apply returns k with cg's overrides applied over it.
func (o *Overrides) Apply(cg host.Cgroup, k memcg.Knobs) memcg.Knobs {
	o.mu.Lock()
	defer o.mu.Unlock()
	// Stored overrides were validated by Set or LoadOverrides and never
	// hold both halves of a pair, so applying them cannot fail.
	_ = k.Apply(o.m[cg])
	return k
}

// Delete drops cg's overrides, so the configuration's knobs apply again.
func (o *Overrides) Delete(cg host.Cgroup) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.m[cg]; !ok {
		return nil
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
	m := map[host.Cgroup]map[string]string{}
	if err := o.persist(m); err != nil {
		return err
	}
	o.m = m
	return nil
}

// overridesFile is the file's JSON shape.
type overridesFile struct {
	Version int                          `json:"version"`
	Cgroups map[string]map[string]string `json:"cgroups"`
}

// persist writes m to the file atomically: a temporary file in the same
// directory, synced, renamed over the old one, and the directory synced,
// so a crash leaves the old file or the new one, never a torn one.
func (o *Overrides) persist(m map[host.Cgroup]map[string]string) error {
	if o.path == "" {
		return nil
	}
	f := overridesFile{Version: overridesVersion, Cgroups: map[string]map[string]string{}}
	for cg, knobs := range m {
		f.Cgroups[string(cg)] = knobs
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

// checkCgroup refuses a cgroup that is not a clean hierarchy path.
func checkCgroup(cg host.Cgroup) error {
	s := string(cg)
	if !strings.HasPrefix(s, "/") || path.Clean(s) != s {
		return fmt.Errorf("cgroup: invalid value %q: allowed a clean hierarchy path starting with /, as in /proc/PID/cgroup", s)
	}
	return nil
}

// parseError is a problem at a byte offset of the overrides file.
type parseError struct {
	offset int64
	err    error
}

func (e *parseError) Error() string { return fmt.Sprintf("offset %d: %v", e.offset, e.err) }

// parseOverrides reads the file token by token, so that every problem,
// from a stray comma to a knob out of range, carries its offset:
//
//	{"version": 1, "cgroups": {"/a": {"dirty_bytes": "16777216"}}}
func parseOverrides(b []byte) (map[host.Cgroup]map[string]string, error) {
	d := &tokens{b: b, dec: json.NewDecoder(bytes.NewReader(b))}
	d.dec.UseNumber()
	m := map[host.Cgroup]map[string]string{}
	version := 0
	err := d.object(func(key string, at int64) error {
		switch key {
		case "version":
			n, at, err := d.number()
			if err != nil {
				return err
			}
			if n != overridesVersion {
				return &parseError{at, fmt.Errorf("version: invalid value %d: allowed %d", n, overridesVersion)}
			}
			version = n
			return nil
		case "cgroups":
			return d.object(func(cg string, at int64) error {
				if err := checkCgroup(host.Cgroup(cg)); err != nil {
					return &parseError{at, err}
				}
				knobs := map[string]string{}
				err := d.object(func(name string, at int64) error {
					v, _, err := d.str()
					if err != nil {
						return err
					}
					knobs[name] = v
					k := memcg.DefaultKnobs()
					if err := k.Apply(knobs); err != nil {
						return &parseError{at, fmt.Errorf("cgroup %s: %w", cg, err)}
					}
					return nil
				})
				if len(knobs) > 0 {
					m[host.Cgroup(cg)] = knobs
				}
				return err
			})
		}
		return &parseError{at, fmt.Errorf("unknown key %q: allowed \"version\" and \"cgroups\"", key)}
	})
	if err != nil {
		return nil, err
	}
	if _, err := d.dec.Token(); err != io.EOF {
		return nil, &parseError{d.dec.InputOffset(), errors.New("data after the closing brace")}
	}
	if version == 0 {
		return nil, &parseError{0, fmt.Errorf("version: missing: want \"version\": %d", overridesVersion)}
	}
	return m, nil
}

// tokens walks a JSON document, reporting offsets.
type tokens struct {
	b   []byte
	dec *json.Decoder
}

// next returns the next token and the offset where it starts.
func (d *tokens) next() (json.Token, int64, error) {
	at := d.dec.InputOffset()
	tok, err := d.dec.Token()
	if err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, se.Offset, &parseError{se.Offset, err}
		}
		if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, d.dec.InputOffset(), &parseError{d.dec.InputOffset(), io.ErrUnexpectedEOF}
		}
		return nil, at, &parseError{at, err}
	}
	return tok, d.start(at), nil
}

// start moves an offset taken before a token (the end of the previous one)
// past the white space and separators the decoder skips, so that it points
// at the token itself.
func (d *tokens) start(at int64) int64 {
	for at < int64(len(d.b)) && strings.IndexByte(" \t\r\n:,", d.b[at]) >= 0 {
		at++
	}
	return at
}

// object reads {"key": value, ...}, calling each to read the value; a key
// given twice is an error.
func (d *tokens) object(each func(key string, at int64) error) error {
	tok, at, err := d.next()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return &parseError{at, fmt.Errorf("want an object, got %s", describe(tok))}
	}
	seen := map[string]bool{}
	for d.dec.More() {
		tok, at, err := d.next()
		if err != nil {
			return err
		}
		key := tok.(string) // the decoder only returns strings as object keys
		if seen[key] {
			return &parseError{at, fmt.Errorf("key %q given twice", key)}
		}
		seen[key] = true
		if err := each(key, at); err != nil {
			return err
		}
	}
	_, _, err = d.next() // the closing brace
	return err
}

func (d *tokens) str() (string, int64, error) {
	tok, at, err := d.next()
	if err != nil {
		return "", at, err
	}
	s, ok := tok.(string)
	if !ok {
		return "", at, &parseError{at, fmt.Errorf("want a string, got %s", describe(tok))}
	}
	return s, at, nil
}

func (d *tokens) number() (int, int64, error) {
	tok, at, err := d.next()
	if err != nil {
		return 0, at, err
	}
	n, ok := tok.(json.Number)
	if !ok {
		return 0, at, &parseError{at, fmt.Errorf("want a number, got %s", describe(tok))}
	}
	i, err := n.Int64()
	if err != nil || i < 0 || i > 1<<30 {
		return 0, at, &parseError{at, fmt.Errorf("want a small integer, got %s", n)}
	}
	return int(i), at, nil
}

// describe names a token for an error message.
func describe(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		return fmt.Sprintf("%q", string(t))
	case string:
		return fmt.Sprintf("string %q", t)
	case json.Number:
		return "number " + t.String()
	case bool:
		return fmt.Sprintf("%t", t)
	case nil:
		return "null"
	}
	return fmt.Sprint(tok)
}

// position converts a byte offset to a 1-based line and column.
func position(b []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(b)))
	before := b[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(offset) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}
