package config

import (
	"strings"
	"testing"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

func TestDefault(t *testing.T) {
	c := Default()
	want := memcg.Knobs{DirtyRatio: 10, DirtyBackgroundRatio: 5, MinFreeKbytes: memcg.MinFreeAuto, WritebackFirst: true}
	if c.Defaults != want || c.Under != "/" || !c.LimitedOnly {
		t.Errorf("Default() = %+v", c)
	}
}

func TestParseRules(t *testing.T) {
	c, err := Parse([]byte(`
version: 1
manage:
  under: /kubepods
  limited_only: false
defaults:
  dirty_bytes: 64M
  dirty_background_ratio: 5
rules:
  - match: /kubepods/burstable/**
    set:
      dirty_bytes: 16M
      dirty_background_bytes: 8M
  - match: /kubepods/burstable/pod-db
    set:
      writeback_first: false
      min_free_kbytes: 0
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Under != "/kubepods" || c.LimitedOnly {
		t.Errorf("manage = %q, %v", c.Under, c.LimitedOnly)
	}
	tests := []struct {
		cg   host.Cgroup
		want memcg.Knobs
	}{
		{"/kubepods/besteffort/x", memcg.Knobs{DirtyBytes: 64 << 20, DirtyBackgroundRatio: 5, MinFreeKbytes: memcg.MinFreeAuto, WritebackFirst: true}},
		{"/kubepods/burstable", memcg.Knobs{DirtyBytes: 16 << 20, DirtyBackgroundBytes: 8 << 20, MinFreeKbytes: memcg.MinFreeAuto, WritebackFirst: true}},
		{"/kubepods/burstable/pod-a/c1", memcg.Knobs{DirtyBytes: 16 << 20, DirtyBackgroundBytes: 8 << 20, MinFreeKbytes: memcg.MinFreeAuto, WritebackFirst: true}},
		{"/kubepods/burstable/pod-db", memcg.Knobs{DirtyBytes: 16 << 20, DirtyBackgroundBytes: 8 << 20, MinFreeKbytes: 0, WritebackFirst: false}},
	}
	for _, tt := range tests {
		if got := c.Knobs(tt.cg); got != tt.want {
			t.Errorf("Knobs(%s) = %+v, want %+v", tt.cg, got, tt.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // the error names the line, the field, the value and what is allowed
	}{
		{"empty", ``, []string{"empty", "version: 1"}},
		{"no version", "manage: {under: /}\n", []string{"version: missing: allowed 1"}},
		{"wrong version", "version: 2\n", []string{"config line 1: version: invalid value \"2\": allowed 1"}},
		{"version not a number", "version: one\n", []string{"config line 1: version: invalid value \"one\": allowed 1"}},
		{"unknown top-level key", "version: 1\ndefualts: {}\n",
			[]string{`config line 2: unknown field "defualts": allowed version, manage, defaults, rules; did you mean "defaults"?`}},
		{"unknown key in manage", "version: 1\nmanage:\n  undr: /a\n",
			[]string{`config line 3: unknown field "undr" in manage: allowed under, limited_only; did you mean "under"?`}},
		{"unknown key in a rule", "version: 1\nrules:\n  - match: /a\n  - match: /b\n    sett: {dirty_ratio: 5}\n",
			[]string{`config line 5: unknown field "sett" in rules[1]: allowed match, set; did you mean "set"?`}},
		{"unknown key, nothing close", "version: 1\nwhatever: 1\n",
			[]string{`config line 2: unknown field "whatever": allowed version, manage, defaults, rules`}},
		{"unknown knob", "version: 1\ndefaults:\n  dirty_ratoi: 5\n",
			[]string{`config line 3: defaults: unknown knob "dirty_ratoi": allowed dirty_ratio, dirty_bytes, dirty_background_ratio, dirty_background_bytes, min_free_kbytes, writeback_first; did you mean "dirty_ratio"?`}},
		{"unknown knob in a rule", "version: 1\nrules:\n  - match: /a\n    set:\n      writeback_frist: false\n",
			[]string{`config line 5: rules[0].set: unknown knob "writeback_frist"`, `did you mean "writeback_first"?`}},
		{"ratio out of range", "version: 1\ndefaults:\n  dirty_ratio: 150\n", []string{`config line 3: defaults.dirty_ratio: invalid value "150": allowed an integer percentage from 0 to 100`}},
		{"bad size in a rule", "version: 1\nrules:\n  - match: /a\n    set:\n      dirty_bytes: 16MiB\n", []string{"line 5", "rules[0].set.dirty_bytes", `"16MiB"`, "64M"}},
		{"both halves of a pair", "version: 1\ndefaults:\n  dirty_ratio: 10\n  dirty_bytes: 1G\n", []string{"only one of dirty_ratio and dirty_bytes"}},
		{"rule without match", "version: 1\nrules:\n  - set: {dirty_ratio: 5}\n", []string{"config line 3: rules[0].match: missing"}},
		{"bad glob", "version: 1\nrules:\n  - match: /a/[\n", []string{"line 3", "rules[0].match", `"/a/["`}},
		{"relative under", "version: 1\nmanage:\n  under: kubepods\n", []string{"config line 3: manage.under", `"kubepods"`, "starting with /"}},
		{"limited_only not a boolean", "version: 1\nmanage:\n  limited_only: sometimes\n", []string{`config line 3: manage.limited_only: invalid value "sometimes": allowed true or false`}},
		{"knob set twice", "version: 1\ndefaults:\n  dirty_ratio: 10\n  dirty_ratio: 20\n", []string{"line 4", "dirty_ratio", "line 3"}},
		{"nested value", "version: 1\ndefaults:\n  dirty_ratio: [1, 2]\n", []string{"line 3", "defaults.dirty_ratio", "single value"}},
		{"a list for manage", "version: 1\nmanage: [/a]\n", []string{"config line 2: manage: want a mapping, not a list"}},
		{"a mapping for rules", "version: 1\nrules: {match: /a}\n", []string{"config line 2: rules: want a list, not a mapping"}},
		{"a list for under", "version: 1\nmanage: {under: [/a]}\n", []string{"config line 2: manage.under: want a single value, not a list"}},
		// yaml.v3 says "line 1" for both: its parser counts from 0 and
		// names where the enclosing collection starts.
		{"syntax error on line 2", "version: 1\ndefaults: {dirty_ratio: 10\n",
			[]string{`config line 2: YAML syntax: did not find expected ',' or '}'`}},
		{"syntax error on line 5", "version: 1\nmanage:\n  under: /\nrules:\n  - match: [/a\n",
			[]string{`config line 5: YAML syntax: did not find expected ',' or ']'`}},
		{"syntax error on line 5, the scanner's", "version: 1\nmanage:\n  under: /\ndefaults:\n dirty_ratio: 5: 6\n",
			[]string{`config line 5: YAML syntax: mapping values are not allowed in this context`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			for _, s := range tt.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			if strings.Contains(err.Error(), "config.") || strings.Contains(err.Error(), "type ") {
				t.Errorf("error %q names a Go type", err)
			}
		})
	}
}

func TestRuleMatches(t *testing.T) {
	tests := []struct {
		match string
		cg    host.Cgroup
		want  bool
	}{
		{"/a/*", "/a/b", true},
		{"/a/*", "/a/b/c", false},
		{"/a/**", "/a", true},
		{"/a/**", "/a/b/c", true},
		{"/a/**", "/ab", false},
		{"/*/x/**", "/k/x/y", true},
		{"/**", "/anything/at/all", true},
		{"/a", "/a", true},
	}
	for _, tt := range tests {
		if got := (Rule{Match: tt.match}).Matches(tt.cg); got != tt.want {
			t.Errorf("%q matches %q = %v, want %v", tt.match, tt.cg, got, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(string(defaultYAML))
	f.Add("version: 1\nrules:\n  - match: /a/**\n    set: {dirty_bytes: 16M}\n")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Parse([]byte(s))
		if err != nil {
			return
		}
		// Whatever loads must give knobs that obey the kernel's pairing.
		k := c.Knobs("/a/b")
		if k.DirtyRatio != 0 && k.DirtyBytes != 0 || k.DirtyBackgroundRatio != 0 && k.DirtyBackgroundBytes != 0 {
			t.Fatalf("loaded knobs break ratio/bytes exclusion: %+v", k)
		}
	})
}

// FuzzRuleMatches: Matches never panics, whatever the glob and the path,
// and keeps the rules the README states: "/**" matches every cgroup, a
// glob without metacharacters matches exactly its own path, and P/**
// matches P and every descendant of P.
func FuzzRuleMatches(f *testing.F) {
	for _, s := range [][2]string{
		{"/kubepods/*", "/kubepods/pod1"},
		{"/kubepods/burstable/**", "/kubepods/burstable/pod1/c"},
		{"/**", "/"},
		{"[", "/a"},
		{"/a/**/**", "/a/b"},
		{"/a\\", "/a"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, match, cg string) {
		if _, err := host.ParseCgroup(cg); err != nil {
			return
		}
		got := Rule{Match: match}.Matches(host.Cgroup(cg))
		if match == "/**" && !got {
			t.Fatalf("/** does not match %q", cg)
		}
		if !strings.ContainsAny(match, `*?[\`) && got != (match == cg) {
			t.Fatalf("plain %q matches %q: %v", match, cg, got)
		}
		if !strings.ContainsAny(cg, `*?[\`) {
			sub := Rule{Match: strings.TrimSuffix(cg, "/") + "/**"}
			if !sub.Matches(host.Cgroup(cg)) {
				t.Fatalf("%s does not match %s itself", sub.Match, cg)
			}
			if child := host.Cgroup(strings.TrimSuffix(cg, "/") + "/x"); !sub.Matches(child) {
				t.Fatalf("%s does not match %s, a child", sub.Match, child)
			}
		}
	})
}
