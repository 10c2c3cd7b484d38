// Package doclinks checks that the documentation's references resolve:
// every relative Markdown link in README.md and docs/, every path of docs/
// a page names in its text, and every file of the tree a current page
// (README.md, docs/*.md) points at. Lab notes (docs/lab/) are the record of
// their day and may name code that has gone since; their links and their
// references to docs/ must still resolve.
package doclinks

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// mdLink is a Markdown link or image: [text](target) or [text](target "title").
var mdLink = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// docsRef is a path of docs/ named in running text, relative to the
// module root: "docs/tracker.md", "docs/lab/raw/issue7-vm.md". The second
// group is a brace or a star that follows (after a dash or a dot, if any):
// a pattern, not a path.
var docsRef = regexp.MustCompile(`(?:^|[\s(\x60"'])(docs/[A-Za-z0-9_./-]*[A-Za-z0-9_])((?:[-.])?[{*])?`)

// treeRef is a path into the module's own tree named in running text,
// relative to the module root, such as "sched/core.go" or
// "cgroupfs/act/pace.go": a top-level directory of the module followed
// by at least one more element. A package path may end in a Go name
// ("sim/daemon.Daemon"), which is not part of the path.
var treeRef = regexp.MustCompile(`(?:^|[\s(\x60"'])((?:agent|atomicfile|cgroupfs|cmd|config|control|deploy|experiments|host|internal|memcg|metrics|overrides|policy|resolve|sched|scripts|sim|state|test)/[A-Za-z0-9_./-]*[A-Za-z0-9_])((?:[-.])?[{*])?`)

// goName is a Go name after a package path: ".Daemon".
var goName = regexp.MustCompile(`\.[A-Z][A-Za-z0-9_]*$`)

// problem is one reference that does not resolve.
type problem struct {
	file, ref string
}

// check returns the references of the page at rel (relative to root) that
// do not resolve; tree says to check references into the code as well.
func check(root, rel string, text []byte, tree bool) []problem {
	var out []problem
	dir := filepath.Dir(filepath.Join(root, rel))
	exists := func(p string) bool {
		_, err := os.Stat(p)
		return err == nil
	}
	for _, m := range mdLink.FindAllSubmatch(text, -1) {
		target := string(m[1])
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
			continue
		}
		target, _, _ = strings.Cut(target, "#") // anchors are not checked
		if !exists(filepath.Join(dir, filepath.FromSlash(target))) {
			out = append(out, problem{rel, string(m[1])})
		}
	}
	var refs []string
	take := func(re *regexp.Regexp) {
		for _, m := range re.FindAllSubmatch(text, -1) {
			if len(m[2]) == 0 {
				refs = append(refs, strings.TrimRight(string(m[1]), "."))
			}
		}
	}
	take(docsRef)
	if tree {
		take(treeRef)
	}
	for _, ref := range refs {
		path := func(r string) string { return filepath.Join(root, filepath.FromSlash(r)) }
		if !exists(path(ref)) && !exists(path(goName.ReplaceAllString(ref, ""))) {
			out = append(out, problem{rel, ref})
		}
	}
	return out
}

// pages returns README.md and every Markdown file beneath docs/, relative
// to root, and whether each is a current page (not a lab note).
func pages(t *testing.T, root string) map[string]bool {
	t.Helper()
	out := map[string]bool{"README.md": true}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = filepath.Dir(rel) == "docs"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestEveryReferenceResolves(t *testing.T) {
	root := filepath.Join("..", "..")
	all := pages(t, root)
	if len(all) < 10 {
		t.Fatalf("found only %d pages under %s: not the module root?", len(all), root)
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, rel := range names {
		text, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range check(root, rel, text, all[rel]) {
			t.Errorf("%s: %s does not resolve", p.file, p.ref)
		}
	}
}

// The checker finds what it must and passes what it must: each case is a
// page in a tree holding docs/a.md, docs/lab/b.md and sched/core.go.
func TestCheckFindsBrokenReferences(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"docs/a.md", "docs/lab/b.md", "sched/core.go"} {
		p := filepath.Join(root, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, page, text string
		tree             bool
		want             []string
	}{
		{"relative link", "docs/a.md", "see [b](lab/b.md) and [a](a.md#anchor)", true, nil},
		{"broken link", "docs/a.md", "see [c](lab/c.md)", true, []string{"lab/c.md"}},
		{"link from a lab note", "docs/lab/b.md", "[a](../a.md), [x](../x.md)", false, []string{"../x.md"}},
		{"web link and anchor", "docs/a.md", "[w](https://example.com/x.md) [h](#here)", true, nil},
		{"image", "docs/a.md", "![p](img/p.png)", true, []string{"img/p.png"}},
		{"docs path in text", "docs/a.md", "as docs/lab/b.md says; docs/gone.md.", true, []string{"docs/gone.md"}},
		{"code path in a page", "docs/a.md", "the core (sched/core.go) and `sched/ready.go`", true, []string{"sched/ready.go"}},
		{"code path in a lab note", "docs/lab/b.md", "agent/throttle.go, docs/gone.md", false, []string{"docs/gone.md"}},
		{"kernel source is not ours", "docs/a.md", "mm/page-writeback.c, kernel/sched/fair.c", true, nil},
		{"a directory", "docs/a.md", "the package sched/ and docs/lab/", true, nil},
		{"a Go name after a package", "docs/a.md", "sched.Core is sched/core.go's; `sched/gone.Core`", true, []string{"sched/gone.Core"}},
		{"a pattern", "docs/a.md", "docs/lab/raw/issue7-*.md and docs/x-{a,b}.md", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range check(root, tc.page, []byte(tc.text), tc.tree) {
				got = append(got, p.ref)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("check(%q) = %q, want %q", tc.text, got, tc.want)
			}
		})
	}
}
