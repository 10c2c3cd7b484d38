package scenario

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Assignment sets one field of a scenario before it is validated: Path is
// dotted with list indices ("cgroups[0].limit", "machine.memory",
// "variants[2].memcgd.interval"), Value the YAML scalar.
type Assignment struct {
	Path, Value string
}

// ParseAssignment reads "path=value".
func ParseAssignment(s string) (Assignment, error) {
	p, v, ok := strings.Cut(s, "=")
	if !ok || p == "" {
		return Assignment{}, fmt.Errorf("--set %q: want path=value, such as cgroups[0].limit=100M", s)
	}
	return Assignment{Path: p, Value: v}, nil
}

// setPath sets a scalar in a YAML document, creating missing mapping keys.
func setPath(doc *yaml.Node, pth, value string) error {
	n := doc
	if n.Kind == yaml.DocumentNode {
		n = n.Content[0]
	}
	parts := strings.Split(pth, ".")
	for i, part := range parts {
		name, idx := part, -1
		if j := strings.IndexByte(part, '['); j >= 0 && strings.HasSuffix(part, "]") {
			x, err := strconv.Atoi(part[j+1 : len(part)-1])
			if err != nil || x < 0 {
				return fmt.Errorf("--set %s: %q is not a list index", pth, part[j:])
			}
			name, idx = part[:j], x
		}
		if n.Kind != yaml.MappingNode {
			return fmt.Errorf("--set %s: %s is not a mapping", pth, strings.Join(parts[:i], "."))
		}
		var child *yaml.Node
		for k := 0; k+1 < len(n.Content); k += 2 {
			if n.Content[k].Value == name {
				child = n.Content[k+1]
			}
		}
		last := i == len(parts)-1 && idx < 0
		if child == nil {
			if idx >= 0 {
				return fmt.Errorf("--set %s: the scenario has no list %s", pth, name)
			}
			child = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			if last {
				child = &yaml.Node{Kind: yaml.ScalarNode}
			}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: name}, child)
		}
		if idx >= 0 {
			if child.Kind != yaml.SequenceNode || idx >= len(child.Content) {
				return fmt.Errorf("--set %s: %s has no element %d", pth, name, idx)
			}
			child = child.Content[idx]
		}
		if i == len(parts)-1 {
			if child.Kind != yaml.ScalarNode {
				return fmt.Errorf("--set %s: the field is a %s, not a single value", pth, kindName(child.Kind))
			}
			child.Value, child.Tag, child.Style = value, "", 0
			return nil
		}
		n = child
	}
	return nil
}
