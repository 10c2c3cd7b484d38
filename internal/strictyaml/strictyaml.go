// Package strictyaml decodes memcgd's YAML files (the config, the
// simulator's scenarios) strictly and says where they are wrong in the
// file's own terms: a syntax error at the line where it is, and a key the
// file's type does not have with the keys allowed at that level and the
// nearest of them, never a Go type's name.
//
// go.yaml.in/yaml/v3 numbers the lines of its parser's errors from 0 and
// gives the line where the enclosing collection starts rather than where
// the parser stopped (decode.go, parser.fail, uses the 0-based
// context_mark); its scanner's errors are numbered from 1. Parse finds the
// line itself.
package strictyaml

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/memcgd/memcgd/internal/suggest"
)

// SyntaxError is a document that is not YAML.
type SyntaxError struct {
	// Line is where the parser stopped, from 1; 0 when unknown.
	Line int
	// Msg is the parser's reason.
	Msg string
}

func (e *SyntaxError) Error() string {
	if e.Line == 0 {
		return "YAML syntax: " + e.Msg
	}
	return fmt.Sprintf("line %d: YAML syntax: %s", e.Line, e.Msg)
}

// KeyError is a mapping key that the decoded type has no field for, or a
// node of the wrong kind (a list where a mapping belongs).
type KeyError struct {
	// Line is the key's line in the document, from 1.
	Line int
	// Path is where the mapping is: "" at the top, then "manage",
	// "rules[0]", "cgroups[2].knobs".
	Path string
	// Key is the key given.
	Key string
	// Allowed are the keys allowed there, in the type's order.
	Allowed []string
	// Want, when set, is the kind of node that belongs at Path.Key
	// instead of the one given (Got); Allowed is then empty.
	Want, Got string
}

func (e *KeyError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason()) }

// Reason is the error without its line, for a key that came from
// elsewhere than the document (memcgd sim --set).
func (e *KeyError) Reason() string {
	if e.Want != "" {
		return fmt.Sprintf("%s: want %s, not %s", join(e.Path, e.Key), e.Want, e.Got)
	}
	in := ""
	if e.Path != "" {
		in = " in " + e.Path
	}
	return fmt.Sprintf("unknown field %q%s: allowed %s%s", e.Key, in, strings.Join(e.Allowed, ", "), suggest.DidYouMean(e.Key, e.Allowed))
}

// In wraps err, an error of this package or one that starts with its
// line ("line N: ..."), with the name of the document: "config line 3:
// ...", or "config: ..." without a line.
func In(what string, err error) error {
	if strings.HasPrefix(err.Error(), "line ") {
		return fmt.Errorf("%s %w", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Parse reads a document into a node tree. A syntax error is a
// *SyntaxError at the line where the parser stopped. An empty document
// gives a node of Kind 0.
func Parse(b []byte) (*yaml.Node, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		return nil, syntaxError(b, err)
	}
	return &n, nil
}

// Unmarshal reads b into v, a pointer to a struct, strictly: Parse, then
// Check against v's type, then decode. An empty document leaves v as it
// is and returns empty true.
func Unmarshal(b []byte, v any) (empty bool, err error) {
	n, err := Parse(b)
	if err != nil {
		return false, err
	}
	if n.Kind == 0 {
		return true, nil
	}
	return false, Decode(n, v)
}

// Decode checks n against v's type (Check) and decodes it into v.
func Decode(n *yaml.Node, v any) error {
	if err := Check(n, reflect.TypeOf(v)); err != nil {
		return err
	}
	if err := n.Decode(v); err != nil {
		return decodeError(err)
	}
	return nil
}

// Field is the type of the field of t (a struct, or a map of string keys,
// through pointers) that key name holds at path, or a *KeyError (without
// a line) listing the keys allowed there: for a caller that walks a path
// of keys itself (memcgd sim --set).
func Field(t reflect.Type, path, name string) (reflect.Type, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == nodeType:
		return t, nil
	case t.Kind() == reflect.Map:
		return t.Elem(), nil
	case t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(leafType):
		return nil, fmt.Errorf("%s is a single value: it has no field %q", path, name)
	}
	fields := structFields(t)
	if f, ok := lookup(fields, name); ok {
		return f.typ, nil
	}
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	return nil, &KeyError{Path: path, Key: name, Allowed: names}
}

// IsScalar reports whether t takes a single value: a Go scalar or a Leaf
// of scalar nodes.
func IsScalar(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(leafType) {
		return reflect.New(t).Interface().(Leaf).YAMLKind() == yaml.ScalarNode
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Slice, reflect.Map, reflect.Array:
		return false
	}
	return t != nodeType
}

// Leaf is a type that decodes itself from one node (it implements
// yaml.Unmarshaler) and says which kind of node it takes, so that Check
// can name the field when the kind is wrong.
type Leaf interface {
	YAMLKind() yaml.Kind
}

var (
	nodeType = reflect.TypeFor[yaml.Node]()
	leafType = reflect.TypeFor[Leaf]()
)

// Check checks that every mapping key of n is a field of t (a struct,
// through pointers, slices and maps of string keys; the key of a field is
// its yaml tag or, untagged, its lower-cased name) and that mappings and
// lists stand where t has them. A yaml.Node field takes anything.
func Check(n *yaml.Node, t reflect.Type) error {
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil
		}
		n = n.Content[0]
	}
	return check(n, t, "", "")
}

func check(n *yaml.Node, t reflect.Type, path, key string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if t == nodeType {
		return nil
	}
	if reflect.PointerTo(t).Implements(leafType) {
		want := reflect.New(t).Interface().(Leaf).YAMLKind()
		if n.Kind != want {
			return &KeyError{Line: n.Line, Path: path, Key: key, Want: kindName(want), Got: kindName(n.Kind)}
		}
		return nil
	}
	here := join(path, key)
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return &KeyError{Line: n.Line, Path: path, Key: key, Want: kindName(yaml.MappingNode), Got: kindName(n.Kind)}
		}
		fields := structFields(t)
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = f.name
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			f, ok := lookup(fields, k.Value)
			if !ok {
				return &KeyError{Line: k.Line, Path: here, Key: k.Value, Allowed: names}
			}
			if err := check(v, f.typ, here, k.Value); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return &KeyError{Line: n.Line, Path: path, Key: key, Want: kindName(yaml.SequenceNode), Got: kindName(n.Kind)}
		}
		for i, e := range n.Content {
			if err := check(e, t.Elem(), "", here+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return &KeyError{Line: n.Line, Path: path, Key: key, Want: kindName(yaml.MappingNode), Got: kindName(n.Kind)}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := check(n.Content[i+1], t.Elem(), here, n.Content[i].Value); err != nil {
				return err
			}
		}
	default:
		if n.Kind != yaml.ScalarNode {
			return &KeyError{Line: n.Line, Path: path, Key: key, Want: kindName(yaml.ScalarNode), Got: kindName(n.Kind)}
		}
	}
	return nil
}

type field struct {
	name string
	typ  reflect.Type
}

// structFields are t's fields as yaml.v3 names them.
func structFields(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out = append(out, field{name, f.Type})
	}
	return out
}

func lookup(fs []field, name string) (field, bool) {
	for _, f := range fs {
		if f.name == name {
			return f, true
		}
	}
	return field{}, false
}

func join(path, key string) string {
	switch {
	case path == "":
		return key
	case key == "":
		return path
	case strings.HasPrefix(key, "["):
		return path + key
	}
	return path + "." + key
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a single value"
	case yaml.AliasNode:
		return "an alias"
	}
	return "nothing"
}

// parserProblems are the reasons go.yaml.in/yaml/v3's parser (parserc.go)
// gives, whose line it misreports; its scanner's lines are right.
var parserProblems = map[string]bool{
	"did not find expected <stream-start>":   true,
	"did not find expected <document start>": true,
	"found undefined tag handle":             true,
	"did not find expected node content":     true,
	"did not find expected '-' indicator":    true,
	"did not find expected key":              true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found duplicate %TAG directive":         true,
}

// syntaxError turns yaml.v3's error for b into a *SyntaxError at the right
// line. Where yaml.v3's line cannot be trusted (a parser error, or none
// given) the line is the first from which b's first lines fail with the
// same reason: the parser stops on the line where the document stops
// making sense, so its prefix ending there fails alike, and so do longer
// ones, while shorter ones do not, except when truncation itself breaks
// the text the same way (an unclosed bracket) before that line. The search starts after yaml.v3's
// line, its 0-based count of the problem's line or of the line where the
// enclosing collection starts, so at or before the problem (or the end of
// the document, after its last line).
func syntaxError(b []byte, err error) error {
	msg, ok := strings.CutPrefix(err.Error(), "yaml: ")
	if !ok {
		return err
	}
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		num, reason, ok := strings.Cut(rest, ": ")
		if n, err := strconv.Atoi(num); ok && err == nil {
			line, msg = n, reason
		}
	}
	if line > 0 && !parserProblems[msg] {
		return &SyntaxError{Line: line, Msg: msg}
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	if len(lines) > 1 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1] // after the last newline: no line
	}
	// yaml.v3's count is 0-based here, and none is line 1; a problem at
	// the end of the document is on its last line.
	from := max(min(line+1, len(lines)), 1)
	fails := func(k int) bool {
		var n yaml.Node
		e := yaml.Unmarshal(bytes.Join(lines[:k], nil), &n)
		return e != nil && reason(e) == msg
	}
	// Prefixes from the problem's line on fail alike: a binary search
	// finds the first, in as many parses as the document has bits of
	// lines.
	lo, hi := from, len(lines)
	if !fails(hi) {
		return &SyntaxError{Line: from, Msg: msg}
	}
	for lo < hi {
		if mid := (lo + hi) / 2; fails(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return &SyntaxError{Line: lo, Msg: msg}
}

// reason is a yaml.v3 error's message without "yaml: line N: ".
func reason(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if _, r, ok := strings.Cut(rest, ": "); ok {
			return r
		}
	}
	return msg
}

// decodeError rewords what yaml.v3's decoding can still refuse after
// Check: a value of the wrong type for a Go field, or a key given twice.
func decodeError(err error) error {
	te, ok := err.(*yaml.TypeError)
	if !ok || len(te.Errors) == 0 {
		return err
	}
	return fmt.Errorf("%s", strings.Join(te.Errors, "; "))
}
