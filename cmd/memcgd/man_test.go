package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// manDir holds the man pages go generate writes (main.go).
const manDir = "../../docs/man"

// The committed man pages are the ones the command tree gives now: after
// a change to a command, its help or its flags, run go generate
// ./cmd/memcgd.
func TestManPagesAreUpToDate(t *testing.T) {
	pages, err := manPages()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(manDir, "*.1"))
	if err != nil {
		t.Fatal(err)
	}
	var committed []string
	for _, f := range files {
		committed = append(committed, filepath.Base(f))
	}
	var want []string
	for name := range pages {
		want = append(want, name)
	}
	slices.Sort(want)
	if !slices.Equal(committed, want) {
		t.Errorf("docs/man has %v, the commands give %v: run go generate ./cmd/memcgd", committed, want)
	}
	for name, page := range pages {
		b, err := os.ReadFile(filepath.Join(manDir, name))
		if err != nil {
			continue // reported above
		}
		if !bytes.Equal(b, page) {
			t.Errorf("docs/man/%s is out of date: run go generate ./cmd/memcgd", name)
		}
	}
	for _, name := range []string{"memcgd.1", "memcgd-run.1", "memcgd-sim-sweep.1"} {
		if !bytes.Contains(pages[name], []byte(".SH EXIT STATUS\n")) {
			t.Errorf("%s has no EXIT STATUS section", name)
		}
	}
	if _, ok := pages["memcgd-__gendocs.1"]; ok {
		t.Error("the hidden __gendocs command has a man page")
	}
}

// cobra's completion command writes a script for each shell, and the
// scripts complete scenario names and flag values.
func TestCompletion(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "sim", "seed-00"}, []string{"seed-000\n", "seed-001-read\n"}},
		{[]string{"__complete", "run", "--dirty-tracker", ""}, []string{"auto\n", "on\n", "off\n"}},
		{[]string{"__complete", "run", "--log-level", ""}, []string{"debug\n", "error\n"}},
	} {
		var out, errOut bytes.Buffer
		execute(context.Background(), tt.args, &out, &errOut)
		for _, w := range tt.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: %q lacks %q", tt.args, out.String(), w)
			}
		}
	}
	for shell, want := range map[string]string{"bash": "__start_memcgd", "zsh": "#compdef memcgd", "fish": "complete -c memcgd"} {
		var out, errOut bytes.Buffer
		if code := execute(context.Background(), []string{"completion", shell}, &out, &errOut); code != exitOK || !strings.Contains(out.String(), want) {
			t.Errorf("completion %s: exit %d, output lacks %q; stderr %s", shell, code, want, errOut.String())
		}
	}
}
