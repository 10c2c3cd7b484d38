package scenario

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/memcgd/memcgd/internal/strictyaml"
)

// Assignment sets one field of a scenario before it is validated: Path is
// dotted with list indices ("cgroups[0].limit", "machine.memory",
// "variants[2].memcgd.interval"), Value the YAML scalar.
type Assignment struct {
	Path, Value string
}

// String is the assignment as given: path=value.
func (a Assignment) String() string { return a.Path + "=" + a.Value }

// ParseAssignment reads "path=value".
func ParseAssignment(s string) (Assignment, error) {
	p, v, ok := strings.Cut(s, "=")
	if !ok || p == "" {
		return Assignment{}, &SetError{Arg: s, Err: errors.New("want path=value, such as cgroups[0].limit=100M")}
	}
	return Assignment{Path: p, Value: v}, nil
}

// SetError is an assignment (memcgd sim --set) that cannot apply or
// gives a value the field does not allow: it names the argument as the
// user gave it, not a line of the YAML it was applied to.
type SetError struct {
	// Arg is the assignment, path=value.
	Arg string
	Err error
}

func (e *SetError) Error() string {
	reason := e.Err.Error()
	var ke *strictyaml.KeyError
	var ve *Error
	switch {
	case errors.As(e.Err, &ke):
		reason = ke.Reason()
	case errors.As(e.Err, &ve):
		reason = ve.reason()
	}
	return fmt.Sprintf("--set %s: %s", e.Arg, reason)
}

func (e *SetError) Unwrap() error { return e.Err }

// setLine marks the nodes that assignment i wrote: a line no document has,
// -(i+1), so that a validation error at that "line" is reported as the
// assignment's (Parse, located).
func setLine(i int) int { return -(i + 1) }

// setPath applies a to a YAML document, creating missing mapping keys,
// walking the scenario's type (fileT) beside the nodes so that a field
// the type lacks is refused with the fields it has.
func setPath(doc *yaml.Node, a Assignment, line int) error {
	fail := func(err error) error { return &SetError{Arg: a.String(), Err: err} }
	n := doc
	if n.Kind == yaml.DocumentNode {
		n = n.Content[0]
	}
	t := reflect.TypeFor[fileT]()
	parts := strings.Split(a.Path, ".")
	where := ""
	for i, part := range parts {
		name, idx := part, -1
		if j := strings.IndexByte(part, '['); j >= 0 {
			x, err := strconv.Atoi(strings.TrimSuffix(part[j+1:], "]"))
			if !strings.HasSuffix(part, "]") || err != nil || x < 0 {
				return fail(fmt.Errorf("%q is not a list index: allowed [0], [1], ...", part[j:]))
			}
			name, idx = part[:j], x
		}
		if n.Kind != yaml.MappingNode {
			return fail(fmt.Errorf("%s: want a mapping in the scenario, not %s", where, kindArticle(n.Kind)))
		}
		ft, err := strictyaml.Field(t, where, name)
		if err != nil {
			return fail(err)
		}
		here := join(where, name)
		var child *yaml.Node
		for k := 0; k+1 < len(n.Content); k += 2 {
			if n.Content[k].Value == name {
				child = n.Content[k+1]
			}
		}
		if idx >= 0 {
			if ft.Kind() != reflect.Slice {
				return fail(fmt.Errorf("%s is not a list: allowed %s without an index", here, here))
			}
			size := 0
			if child != nil && child.Kind == yaml.SequenceNode {
				size = len(child.Content)
			}
			if idx >= size {
				return fail(fmt.Errorf("%s has no element %d: allowed %s", here, idx, indices(here, size)))
			}
			child, ft, here = child.Content[idx], ft.Elem(), fmt.Sprintf("%s[%d]", here, idx)
		}
		last := i == len(parts)-1
		if last && !strictyaml.IsScalar(ft) {
			return fail(fmt.Errorf("%s holds more than one value: allowed a path to one of its fields, such as %s", here, example(ft, here)))
		}
		if child == nil {
			if ft.Kind() == reflect.Slice {
				return fail(fmt.Errorf("the scenario has no list %s: a --set can change an element, not add one", here))
			}
			child = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: line}
			if last {
				child = &yaml.Node{Kind: yaml.ScalarNode}
			}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: name, Line: line}, child)
		}
		if last {
			if child.Kind != yaml.ScalarNode {
				return fail(fmt.Errorf("%s: the scenario has %s there, not a single value", here, kindArticle(child.Kind)))
			}
			child.Value, child.Tag, child.Style, child.Line = a.Value, "", 0, line
			return nil
		}
		n, t, where = child, ft, here
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// indices says which elements a list of n has.
func indices(list string, n int) string {
	switch n {
	case 0:
		return "none: the scenario lists no " + list
	case 1:
		return "only " + list + "[0]"
	}
	return fmt.Sprintf("%s[0] to %s[%d]", list, list, n-1)
}

// example is one field path below a mapping or list of type t.
func example(t reflect.Type, here string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice:
		return example(t.Elem(), here+"[0]")
	case reflect.Map:
		return here + ".NAME"
	case reflect.Struct:
		if t.NumField() > 0 {
			name, _, _ := strings.Cut(t.Field(0).Tag.Get("yaml"), ",")
			return here + "." + name
		}
	}
	return here
}

func kindArticle(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return "a single value"
}
