// Package config reads memcgd's versioned YAML configuration: which cgroups
// to manage, the default knobs, and per-cgroup rules that match hierarchy
// paths by glob and override knobs. Loading is strict: unknown keys and
// out-of-range values are errors that name the field, the value and what
// is allowed, so a bad reload can be refused and the running config kept.
package config

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/memcgd/memcgd/host"
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

// file is the YAML shape.
type file struct {
	Version  int           `yaml:"version"`
	Manage   manage        `yaml:"manage"`
	Defaults yaml.Node     `yaml:"defaults"`
	Rules    []ruleSection `yaml:"rules"`
}

type manage struct {
	Under       string `yaml:"under"`
	LimitedOnly *bool  `yaml:"limited_only"`
}

type ruleSection struct {
	Match string    `yaml:"match"`
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

// Parse reads and validates a configuration.
func Parse(b []byte) (*Config, error) {
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("config is empty: want at least \"version: %d\"", Version)
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	if f.Version != Version {
		return nil, fmt.Errorf("config: version: invalid value %d: allowed %d", f.Version, Version)
	}
	c := &Config{Under: "/", LimitedOnly: true, Defaults: memcg.DefaultKnobs()}
	switch f.Manage.Under {
	case "":
	case UnderAuto:
		c.Under, c.UnderAuto = "", true
	default:
		under, err := host.ParseCgroup(f.Manage.Under)
		if err != nil {
			return nil, fmt.Errorf("config: manage.under: %w, or %s", err, UnderAuto)
		}
		c.Under = under
	}
	if f.Manage.LimitedOnly != nil {
		c.LimitedOnly = *f.Manage.LimitedOnly
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
		if rs.Match == "" {
			return nil, fmt.Errorf("config: %s.match: missing: allowed a glob over hierarchy paths such as /kubepods/*", where)
		}
		if _, err := path.Match(strings.TrimSuffix(rs.Match, "/**"), "/"); err != nil {
			return nil, fmt.Errorf("config: %s.match: invalid value %q: allowed a path.Match glob, optionally ending in /**", where, rs.Match)
		}
		set, err := knobMap(&rs.Set, where+".set")
		if err != nil {
			return nil, err
		}
		p, err := memcg.ParsePatch(set)
		if err != nil {
			return nil, fieldError(where+".set", &rs.Set, err)
		}
		c.Rules = append(c.Rules, Rule{Match: rs.Match, Set: p})
	}
	return c, nil
}

// knobMap reads a mapping of knob names to scalar values.
func knobMap(n *yaml.Node, where string) (map[string]string, error) {
	m := map[string]string{}
	if n.Kind == 0 {
		return m, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("config line %d: %s: want a mapping of knob names to values", n.Line, where)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if v.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("config line %d: %s.%s: want a single value", v.Line, where, k.Value)
		}
		if _, dup := m[k.Value]; dup {
			return nil, fmt.Errorf("config line %d: %s.%s: set twice", k.Line, where, k.Value)
		}
		m[k.Value] = v.Value
	}
	return m, nil
}

// fieldError prefixes a knob error with where it is in the file.
func fieldError(where string, n *yaml.Node, err error) error {
	var ke *memcg.KnobError
	if errors.As(err, &ke) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == ke.Knob {
				return fmt.Errorf("config line %d: %s.%w", n.Content[i].Line, where, err)
			}
		}
	}
	return fmt.Errorf("config line %d: %s: %w", n.Line, where, err)
}
