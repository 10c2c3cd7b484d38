// Package config reads memcgd's versioned YAML configuration: which cgroups
// to manage, the default knobs, and per-cgroup rules that match hierarchy
// paths by glob and override knobs. Loading is strict: unknown keys and
// out-of-range values are errors that name the field, the value and what
// is allowed, so a bad reload can be refused and the running config kept.
package config

import (
	_ "embed"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/internal/strictyaml"
	"github.com/memcgd/memcgd/memcg"
)

// Version is the only config version this memcgd reads.
const Version = 1

//go:embed default.yaml
var defaultYAML []byte

// DefaultYAML is the embedded policy memcgd runs with no config file.
func DefaultYAML() []byte { return append([]byte(nil), defaultYAML...) }

// Config is a loaded, validated configuration.
type Config struct {
	// Under is the subtree memcgd manages, a hierarchy path. It is ""
	// while UnderAuto awaits ResolveUnder.
	Under host.Cgroup
	// UnderAuto says manage.under is auto: ResolveUnder picks Under.
	UnderAuto bool
	// LimitedOnly restricts management to cgroups that have a memory
	// limit of their own or above them.
	LimitedOnly bool
	// Defaults are the knobs every managed cgroup starts from.
	Defaults memcg.Knobs
	// Rules override knobs for matching cgroups, later rules last.
	Rules []Rule
}

// Rule sets knobs on the cgroups whose hierarchy path matches Match.
type Rule struct {
	// Match is a path.Match glob over hierarchy paths ("/kubepods/*"); a
	// trailing "/**" also matches every descendant.
	Match string
	// Set are the rule's knobs, validated at load.
	Set memcg.Patch
}

// Matches reports whether the rule applies to cg.
func (r Rule) Matches(cg host.Cgroup) bool {
	p := string(cg)
	if prefix, ok := strings.CutSuffix(r.Match, "/**"); ok {
		if prefix == "" || prefix == p {
			return true
		}
		for q := p; q != "/" && q != "."; q = path.Dir(q) {
			if ok, _ := path.Match(prefix, q); ok {
				return true
			}
		}
		return false
	}
	ok, _ := path.Match(r.Match, p)
	return ok
}

// Knobs returns the knobs for cg: the defaults with every matching rule
// applied in order.
func (c *Config) Knobs(cg host.Cgroup) memcg.Knobs {
	k := c.Defaults
	for _, r := range c.Rules {
		if r.Matches(cg) {
			k = r.Set.Apply(k)
		}
	}
	return k
}

// file is the YAML shape. Its scalars are nodes, read by hand, so that a
// value of the wrong type is refused in the file's terms (field, value,
// allowed), not in Go's.
type file struct {
	Version  yaml.Node     `yaml:"version"`
	Manage   manage        `yaml:"manage"`
	Defaults yaml.Node     `yaml:"defaults"`
	Rules    []ruleSection `yaml:"rules"`
}

type manage struct {
	Under       yaml.Node `yaml:"under"`
	LimitedOnly yaml.Node `yaml:"limited_only"`
}

type ruleSection struct {
	Match yaml.Node `yaml:"match"`
	Set   yaml.Node `yaml:"set"`
}

// Default returns the embedded default configuration.
func Default() *Config {
	c, err := Parse(defaultYAML)
	if err != nil {
		panic("embedded default config: " + err.Error())
	}
	return c
}

// Parse reads and validates a configuration. Errors name the line, the
// field, the value and what is allowed: an unknown key lists the keys of
// its level and the nearest one.
func Parse(b []byte) (*Config, error) {
	var f file
	empty, err := strictyaml.Unmarshal(b, &f)
	if err != nil {
		return nil, strictyaml.In("config", err)
	}
	if empty {
		return nil, fmt.Errorf("config is empty: want at least \"version: %d\"", Version)
	}
	version, err := scalar(&f.Version, "version")
	if err != nil {
		return nil, err
	}
	if f.Version.Kind == 0 {
		return nil, fmt.Errorf("config: version: missing: allowed %d", Version)
	}
	if version != strconv.Itoa(Version) {
		return nil, fmt.Errorf("config line %d: version: invalid value %q: allowed %d", f.Version.Line, version, Version)
	}
	c := &Config{Under: "/", LimitedOnly: true, Defaults: memcg.DefaultKnobs()}
	under, err := scalar(&f.Manage.Under, "manage.under")
	if err != nil {
		return nil, err
	}
	switch under {
	case "":
	case UnderAuto:
		c.Under, c.UnderAuto = "", true
	default:
		cg, err := host.ParseCgroup(under)
		if err != nil {
			return nil, fmt.Errorf("config line %d: manage.under: %w, or %s", f.Manage.Under.Line, err, UnderAuto)
		}
		c.Under = cg
	}
	limited, err := scalar(&f.Manage.LimitedOnly, "manage.limited_only")
	if err != nil {
		return nil, err
	}
	if f.Manage.LimitedOnly.Kind != 0 {
		if c.LimitedOnly, err = strconv.ParseBool(limited); err != nil {
			return nil, fmt.Errorf("config line %d: manage.limited_only: invalid value %q: allowed true or false", f.Manage.LimitedOnly.Line, limited)
		}
	}
	defaults, err := knobMap(&f.Defaults, "defaults")
	if err != nil {
		return nil, err
	}
	dp, err := memcg.ParsePatch(defaults)
	if err != nil {
		return nil, fieldError("defaults", &f.Defaults, err)
	}
	c.Defaults = dp.Apply(c.Defaults)
	for i, rs := range f.Rules {
		where := fmt.Sprintf("rules[%d]", i)
		match, err := scalar(&rs.Match, where+".match")
		if err != nil {
			return nil, err
		}
		if match == "" {
			return nil, fmt.Errorf("config line %d: %s.match: missing: allowed a glob over hierarchy paths such as /kubepods/*", ruleLine(&rs), where)
		}
		if _, err := path.Match(strings.TrimSuffix(match, "/**"), "/"); err != nil {
			return nil, fmt.Errorf("config line %d: %s.match: invalid value %q: allowed a path.Match glob, optionally ending in /**", rs.Match.Line, where, match)
		}
		set, err := knobMap(&rs.Set, where+".set")
		if err != nil {
			return nil, err
		}
		p, err := memcg.ParsePatch(set)
		if err != nil {
			return nil, fieldError(where+".set", &rs.Set, err)
		}
		c.Rules = append(c.Rules, Rule{Match: match, Set: p})
	}
	return c, nil
}

// scalar is the text of a single-value node, "" when absent.
func scalar(n *yaml.Node, field string) (string, error) {
	switch n.Kind {
	case 0:
		return "", nil
	case yaml.ScalarNode:
		return n.Value, nil
	}
	return "", fmt.Errorf("config line %d: %s: want a single value, not a %s", n.Line, field, kindName(n.Kind))
}

// ruleLine is the first line of a rule, for a rule that lacks its match.
func ruleLine(rs *ruleSection) int {
	if rs.Set.Line > 0 {
		return rs.Set.Line
	}
	return rs.Match.Line
}

func kindName(k yaml.Kind) string {
	if k == yaml.SequenceNode {
		return "list"
	}
	return "mapping"
}

// knobMap reads a mapping of knob names to scalar values.
func knobMap(n *yaml.Node, where string) (map[string]string, error) {
	m := map[string]string{}
	if n.Kind == 0 {
		return m, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("config line %d: %s: want a mapping of knob names to values, allowed names %s", n.Line, where, strings.Join(memcg.KnobNames(), ", "))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if v.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("config line %d: %s.%s: want a single value", v.Line, where, k.Value)
		}
		if _, dup := m[k.Value]; dup {
			return nil, fmt.Errorf("config line %d: %s.%s: set twice: allowed once (first set on line %d)", k.Line, where, k.Value, keyLine(n, k.Value))
		}
		m[k.Value] = v.Value
	}
	return m, nil
}

// fieldError prefixes a knob error with where it is in the file: the
// line of the knob named.
func fieldError(where string, n *yaml.Node, err error) error {
	var ke *memcg.KnobError
	var ue *memcg.UnknownKnobError
	switch {
	case errors.As(err, &ke):
		if line := keyLine(n, ke.Knob); line > 0 {
			return fmt.Errorf("config line %d: %s.%w", line, where, err)
		}
	case errors.As(err, &ue):
		if line := keyLine(n, ue.Knob); line > 0 {
			return fmt.Errorf("config line %d: %s: %w", line, where, err)
		}
	}
	return fmt.Errorf("config line %d: %s: %w", n.Line, where, err)
}

// keyLine is the line of key in the mapping n, 0 if it has none.
func keyLine(n *yaml.Node, key string) int {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i].Line
		}
	}
	return 0
}
