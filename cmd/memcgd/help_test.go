package main

import (
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/memcgd/memcgd/memcg"
)

// walk calls fn for cmd and every command below it.
func walk(cmd *cobra.Command, fn func(*cobra.Command)) {
	fn(cmd)
	for _, c := range cmd.Commands() {
		walk(c, fn)
	}
}

// knobBlock returns the knob names a help text lists in the block that
// starts with the line beginning with head, up to the next blank line:
// the words of the form name_name after the first colon, or in the first
// column.
func knobBlock(t *testing.T, help, head string, firstColumn bool) []string {
	t.Helper()
	_, block, ok := strings.Cut(help, "\n"+head)
	if !ok {
		t.Fatalf("no block %q in:\n%s", head, help)
	}
	block, _, _ = strings.Cut(block, "\n\n")
	lines := strings.Split(block, "\n")[1:]
	word := regexp.MustCompile(`[a-z]+(_[a-z]+)+`)
	var names []string
	for _, l := range lines {
		if firstColumn {
			names = append(names, strings.Fields(l)[0])
			continue
		}
		if _, after, ok := strings.Cut(l, ": "); ok {
			l = after
		}
		names = append(names, word.FindAllString(l, -1)...)
	}
	return names
}

// The knobs that the root help and set's help list are the table memcgd
// set validates against (memcg.KnobDocs): every name listed is accepted,
// and every knob is listed.
func TestHelpListsTheKnobsSetAccepts(t *testing.T) {
	root := newRootCmd(io.Discard, io.Discard)
	set, _, err := root.Find([]string{"set"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name        string
		help, head  string
		firstColumn bool
	}{
		{"memcgd --help", root.Long, "Knobs, per cgroup", false},
		{"memcgd set --help", set.Long, "Knobs:", true},
	} {
		got := knobBlock(t, "\n"+tt.help, tt.head, tt.firstColumn)
		for _, n := range got {
			if _, err := parsePairs([]string{n + "=0"}); err != nil && !strings.Contains(err.Error(), "invalid value") {
				t.Errorf("%s lists %s, which memcgd set refuses: %v", tt.name, n, err)
			}
		}
		if want := memcg.KnobNames(); !slices.Equal(got, want) {
			t.Errorf("%s lists knobs %v, want %v", tt.name, got, want)
		}
	}
}

// A back-quoted word in a flag's usage becomes the name of its value in
// the help (pflag.UnquoteUsage): only a placeholder in capitals may be
// quoted, never prose. And a flag is persistent only if every subcommand
// uses it: none is.
func TestFlagHelp(t *testing.T) {
	root := newRootCmd(io.Discard, io.Discard)
	placeholder := regexp.MustCompile(`^[A-Z][A-Z0-9_]*([:=/.,][A-Z0-9_.,]*)*$`)
	pflagTypes := []string{"", "string", "int", "int64", "duration", "strings", "stringArray"}
	walk(root, func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			name, usage := pflag.UnquoteUsage(f)
			if !placeholder.MatchString(name) && !slices.Contains(pflagTypes, name) {
				t.Errorf("%s --%s: the help names its value %q (a back-quoted word in %q)", c.CommandPath(), f.Name, name, f.Usage)
			}
			if strings.Contains(usage, "`") {
				t.Errorf("%s --%s: a back quote left in %q", c.CommandPath(), f.Name, usage)
			}
		})
	})
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" {
			t.Errorf("--%s is persistent: every subcommand shows it", f.Name)
		}
	})
	// The flags that belong to some commands only.
	for _, tt := range []struct {
		flag string
		on   []string
	}{
		{"config", []string{"run", "stat"}},
		{"proc", []string{"run", "stat", "set", "get"}},
		{"socket", []string{"run", "stat", "set", "get", "top"}},
	} {
		var got []string
		walk(root, func(c *cobra.Command) {
			if c.Flags().Lookup(tt.flag) != nil {
				got = append(got, c.Name())
			}
		})
		slices.Sort(got)
		slices.Sort(tt.on)
		if !slices.Equal(got, tt.on) {
			t.Errorf("--%s is on %v, want %v", tt.flag, got, tt.on)
		}
	}
}
