package overrides

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

// parse reads the overrides file. The file is JSON, which is YAML, so it is
// read as a yaml.Node tree: every problem, from a stray comma to a knob out
// of range, carries its line and column.
//
//	{"version": 1, "cgroups": {"/a": {"dirty_bytes": "16777216"}}, "ids": {"/a": 2718}}
func parse(b []byte) (map[host.Cgroup]entry, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("empty file: want {\"version\": %d, \"cgroups\": {...}}", version)
		}
		// yaml.v3 names no column for most syntax errors; the JSON
		// decoder's offset does, and every file memcgd writes is JSON.
		var se *json.SyntaxError
		if jerr := json.Unmarshal(b, new(any)); errors.As(jerr, &se) {
			off := se.Offset // just past the offending byte, or the end
			if off < int64(len(b)) {
				off--
			}
			line, col := position(b, off)
			return nil, &posError{line, col, jerr}
		}
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the closing brace")
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("empty file: want {\"version\": %d, \"cgroups\": {...}}", version)
	}
	root := doc.Content[0]
	m := map[host.Cgroup]entry{}
	var ids map[host.Cgroup]uint64
	seenVersion := false
	err := each(root, func(k, v *yaml.Node) error {
		switch k.Value {
		case "version":
			n, err := integer(v)
			if err != nil {
				return err
			}
			if n != version {
				return at(v, fmt.Errorf("version: invalid value %d: allowed %d", n, version))
			}
			seenVersion = true
			return nil
		case "cgroups":
			return each(v, func(k, v *yaml.Node) error {
				cg, err := host.ParseCgroup(k.Value)
				if err != nil {
					return at(k, err)
				}
				knobs := map[string]string{}
				err = each(v, func(k, v *yaml.Node) error {
					if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
						return at(v, fmt.Errorf("cgroup %s: %s: want a string, got %s", cg, k.Value, describe(v)))
					}
					knobs[k.Value] = v.Value
					if _, err := memcg.ParsePatch(knobs); err != nil {
						return at(k, fmt.Errorf("cgroup %s: %w", cg, err))
					}
					return nil
				})
				if err != nil {
					return err
				}
				if len(knobs) > 0 {
					p, _ := memcg.ParsePatch(knobs) // checked knob by knob above
					m[cg] = entry{patch: p}
				}
				return nil
			})
		case "ids":
			ids = map[host.Cgroup]uint64{}
			return each(v, func(k, v *yaml.Node) error {
				n, err := strconv.ParseUint(v.Value, 10, 64)
				if v.Kind != yaml.ScalarNode || v.Tag != "!!int" || err != nil {
					return at(v, fmt.Errorf("ids: %s: want an inode number, got %s", k.Value, describe(v)))
				}
				ids[host.Cgroup(k.Value)] = n
				return nil
			})
		}
		return at(k, fmt.Errorf("unknown key %q: allowed \"version\", \"cgroups\" and \"ids\"", k.Value))
	})
	if err != nil {
		return nil, err
	}
	if !seenVersion {
		return nil, fmt.Errorf("version: missing: want \"version\": %d", version)
	}
	for cg, id := range ids {
		if e, ok := m[cg]; ok {
			e.id = id
			m[cg] = e
		}
	}
	return m, nil
}

// posError is a problem at a line and column of the file.
type posError struct {
	line, col int
	err       error
}

func (e *posError) Error() string { return fmt.Sprintf("line %d, column %d: %v", e.line, e.col, e.err) }
func (e *posError) Unwrap() error { return e.err }

func at(n *yaml.Node, err error) error { return &posError{n.Line, n.Column, err} }

// each calls fn for every key and value of the mapping n, refusing any
// other kind of node, a key that is not a string and a key given twice.
func each(n *yaml.Node, fn func(k, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return at(n, fmt.Errorf("want an object, got %s", describe(n)))
	}
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			return at(k, fmt.Errorf("want a string key, got %s", describe(k)))
		}
		if seen[k.Value] {
			return at(k, fmt.Errorf("key %q given twice", k.Value))
		}
		seen[k.Value] = true
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

// integer reads a small non-negative integer.
func integer(n *yaml.Node) (int, error) {
	i, err := strconv.Atoi(n.Value)
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || err != nil || i < 0 || i > 1<<30 {
		return 0, at(n, fmt.Errorf("want a small integer, got %s", describe(n)))
	}
	return i, nil
}

// describe names a node for an error message.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "an object"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str":
			return strconv.Quote(n.Value)
		case "!!int", "!!float":
			return "number " + n.Value
		case "!!null":
			return "null"
		case "!!bool":
			return n.Value
		}
		return n.Tag + " " + strconv.Quote(n.Value)
	}
	return "nothing"
}

// position converts a byte offset to a 1-based line and column.
func position(b []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(b)))
	before := b[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(offset) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}
