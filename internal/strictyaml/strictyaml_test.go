package strictyaml

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Each document's error is on the line its comment names, counted by hand.
func TestSyntaxErrorLine(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		line int
		msg  string
	}{
		{"an unclosed flow mapping on line 2", "version: 1\ndefaults: {dirty_ratio: 10\n", 2, "did not find expected ',' or '}'"},
		{"an unclosed flow mapping on line 2, more after it", "version: 1\ndefaults: {dirty_ratio: 10\nrules: []\n", 2, "did not find expected ',' or '}'"},
		{"an unclosed flow mapping on line 1", "defaults: {dirty_ratio: 10\n", 1, "did not find expected ',' or '}'"},
		{"an unclosed flow list on line 5", "a: 1\nb: 2\nc: 3\nd: 4\ne: [1, 2\n", 5, "did not find expected ',' or ']'"},
		{"a list item in a mapping on line 5", "a: 1\nb:\n  c: 1\n  d: 2\n  - e\n", 5, "did not find expected key"},
		{"a mapping after a list on line 3", "- a\n- b\nc: d\n", 3, "did not find expected '-' indicator"},
		{"a block scalar dedented on line 3", "a: |\n  x\n y\n", 3, "did not find expected key"},
		{"a flow mapping spanning lines, broken on line 3", "a: {b: 1,\n  c: 2}\nd: [x\n", 3, "did not find expected ',' or ']'"},
		{"an indented key on line 5 (scanner)", "a: 1\nb: 2\nc: 3\nd: 4\n  e: 5\n", 5, "mapping values are not allowed in this context"},
		{"a tab on line 2 (scanner)", "a: 1\n\tb: 2\n", 2, "found a tab character that violates indentation"},
		{"an unterminated string on line 2 (scanner)", "a: 1\nb: \"x\n", 2, "found unexpected end of stream"},
		{"two colons on line 1 (scanner, no line from yaml.v3)", "a: b: c\n", 1, "mapping values are not allowed in this context"},
		{"an unknown alias on line 3 (no line from yaml.v3)", "a: 1\nb: 2\nc: *nope\n", 3, "unknown anchor 'nope' referenced"},
		{"a control character on line 2 (no line from yaml.v3)", "a: 1\nb: \x01\n", 2, "control characters are not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse = %v (%T), want a *SyntaxError", err, err)
			}
			if se.Line != tt.line || se.Msg != tt.msg {
				t.Errorf("Parse = line %d %q, want line %d %q", se.Line, se.Msg, tt.line, tt.msg)
			}
		})
	}
}

type leaf struct{ v string }

func (l *leaf) UnmarshalYAML(n *yaml.Node) error { l.v = n.Value; return nil }
func (leaf) YAMLKind() yaml.Kind                 { return yaml.ScalarNode }

type doc struct {
	Version int                    `yaml:"version"`
	Manage  struct{ Under string } `yaml:"manage"`
	Rules   []rule                 `yaml:"rules"`
	Any     yaml.Node              `yaml:"any"`
	Knobs   map[string]leaf        `yaml:"knobs"`
	Skip    string                 `yaml:"-"`
}

type rule struct {
	Match string   `yaml:"match"`
	Set   *setting `yaml:"set"`
}

type setting struct {
	Limit leaf `yaml:"limit"`
	High  leaf `yaml:"high"`
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want string // "" for none
	}{
		{"every key known", "version: 1\nmanage: {under: /}\nrules: [{match: /a, set: {limit: 1}}]\nany: {x: [1]}\nknobs: {a: 1, b: 2}\n", ""},
		{"a top-level typo", "version: 1\nmanaeg: {}\n",
			`line 2: unknown field "manaeg": allowed version, manage, rules, any, knobs; did you mean "manage"?`},
		{"a nested typo names its level", "version: 1\nmanage:\n  undr: /\n",
			`line 3: unknown field "undr" in manage: allowed under; did you mean "under"?`},
		{"in a list element, through a pointer", "rules:\n  - match: /a\n  - match: /b\n    set: {limt: 1}\n",
			`line 4: unknown field "limt" in rules[1].set: allowed limit, high; did you mean "limit"?`},
		{"nothing close: no guess", "bogus: 1\n",
			`line 1: unknown field "bogus": allowed version, manage, rules, any, knobs`},
		{"a field tagged - is not a key", "skip: 1\n",
			`line 1: unknown field "skip": allowed version, manage, rules, any, knobs`},
		{"a list where a mapping belongs", "manage: [1]\n", `line 1: manage: want a mapping, not a list`},
		{"a mapping where a list belongs", "rules: {match: /a}\n", `line 1: rules: want a list, not a mapping`},
		{"a mapping where a value belongs", "version: {a: 1}\n", `line 1: version: want a single value, not a mapping`},
		{"a leaf says what it takes", "knobs: {a: [1]}\n", `line 1: knobs.a: want a single value, not a list`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := Parse([]byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			err = Check(n, reflect.TypeFor[*doc]())
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Check = %v, want nil", err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Errorf("Check =\n %v\nwant\n %s", err, tt.want)
			}
		})
	}
}

func TestUnmarshal(t *testing.T) {
	var d doc
	if empty, err := Unmarshal([]byte("# nothing\n"), &d); !empty || err != nil {
		t.Errorf("Unmarshal of a comment = %v, %v; want empty", empty, err)
	}
	if _, err := Unmarshal([]byte("version: 2\nknobs: {a: x}\nrules: [{match: /m}]\n"), &d); err != nil {
		t.Fatal(err)
	}
	if d.Version != 2 || d.Knobs["a"].v != "x" || len(d.Rules) != 1 || d.Rules[0].Match != "/m" {
		t.Errorf("Unmarshal = %+v", d)
	}
	_, err := Unmarshal([]byte("version: 1\nversion: 2\n"), &d)
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), `"version" already defined at line 1`) {
		t.Errorf("a key given twice: %v", err)
	}
	if _, err := Unmarshal([]byte("a: [\n"), &d); !errors.As(err, new(*SyntaxError)) {
		t.Errorf("a syntax error: %v (%T), want a *SyntaxError", err, err)
	}
}

func TestIn(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{&SyntaxError{Line: 2, Msg: "x"}, "config line 2: YAML syntax: x"},
		{&SyntaxError{Msg: "x"}, "config: YAML syntax: x"},
		{&KeyError{Line: 3, Key: "a", Allowed: []string{"b"}}, `config line 3: unknown field "a": allowed b`},
		{errors.New("line 4: mapping key \"a\" already defined at line 1"), `config line 4: mapping key "a" already defined at line 1`},
	} {
		if got := In("config", tt.err).Error(); got != tt.want {
			t.Errorf("In(config, %v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
