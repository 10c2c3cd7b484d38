package arch

import (
	"bytes"
	"encoding/json"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/architecture.md's package graph")

// pkg is what `go list -json` says of a package.
type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
}

// list returns the module's packages, by path relative to the module.
func list(t *testing.T) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", Module+"/...")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		rel, ok := strings.CutPrefix(p.ImportPath, Module+"/")
		if !ok {
			continue
		}
		pkgs[rel] = p
	}
	return pkgs
}

// inModule returns the imports of p within the module, relative.
func inModule(p pkg) []string {
	var out []string
	for _, i := range p.Imports {
		if rel, ok := strings.CutPrefix(i, Module+"/"); ok {
			out = append(out, rel)
		}
	}
	return out
}

func TestNoPackageImportsOneAboveIt(t *testing.T) {
	for rel, p := range list(t) {
		for _, dep := range inModule(p) {
			if err := Allowed(rel, dep); err != nil {
				t.Error(err)
			}
			if slices.Contains(Forbidden[rel], dep) {
				t.Errorf("%s imports %s: a model must not import the code it checks", rel, dep)
			}
		}
	}
}

// The pure core does no I/O, reads no clock and starts no goroutine: it
// imports only the standard packages of PureImports and the module's
// values and pure core, calls none of time's Clock functions, and has no
// go statement.
func TestThePureCoreDoesNoIOAndReadsNoClock(t *testing.T) {
	pkgs := list(t)
	for _, rel := range Pure {
		p, ok := pkgs[rel]
		if !ok {
			t.Errorf("pure package %s not found", rel)
			continue
		}
		for _, i := range p.Imports {
			dep, mod := strings.CutPrefix(i, Module+"/")
			switch {
			case mod:
				if l, _, _ := Rank(dep); !slices.Contains(PureLayers, Layers[l].Name) {
					t.Errorf("pure %s imports %s, of layer %q", rel, dep, Layers[l].Name)
				}
			case !slices.Contains(PureImports, i):
				t.Errorf("pure %s imports %s, not one of arch.PureImports", rel, i)
			}
		}
		fset := token.NewFileSet()
		for _, f := range p.GoFiles {
			file, err := parser.ParseFile(fset, filepath.Join(p.Dir, f), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(file, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GoStmt:
					t.Errorf("%s: a go statement in pure %s", fset.Position(n.Pos()), rel)
				case *ast.SelectorExpr:
					if x, ok := n.X.(*ast.Ident); ok && x.Name == "time" && slices.Contains(Clock, n.Sel.Name) {
						t.Errorf("%s: time.%s in pure %s", fset.Position(n.Pos()), n.Sel.Name, rel)
					}
				}
				return true
			})
		}
	}
}

// The rules can fail: a package that imports one above it, and a pure
// one that imports os, are caught.
func TestTheRulesCatchAViolation(t *testing.T) {
	if Allowed("policy", "agent") == nil {
		t.Error("policy importing agent allowed")
	}
	if Allowed("memcg", "policy") == nil {
		t.Error("memcg importing policy allowed")
	}
	if err := Allowed("agent", "sched"); err != nil {
		t.Error(err)
	}
	if err := Allowed("cgroupfs/act", "cgroupfs/format"); err != nil {
		t.Error(err)
	}
	if slices.Contains(PureImports, "os") || slices.Contains(PureImports, "sync") {
		t.Error("os or sync is a pure import")
	}
}

// docs/architecture.md holds the package graph as go list gives it now.
func TestTheDocumentedGraphIsCurrent(t *testing.T) {
	pkgs := list(t)
	graph := map[string][]string{}
	for rel, p := range pkgs {
		if l, _, _ := Rank(rel); l >= len(Layers)-1 {
			continue // tests and experiments
		}
		var deps []string
		for _, d := range inModule(p) {
			if l, _, _ := Rank(d); l < len(Layers)-1 {
				deps = append(deps, d)
			}
		}
		graph[rel] = deps
	}
	want := Graph(graph)
	path := filepath.Join("..", "..", "docs", "architecture.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- package graph: begin -->\n", "<!-- package graph: end -->"
	i, j := bytes.Index(b, []byte(begin)), bytes.Index(b, []byte(end))
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q section", path, strings.TrimSpace(begin), end)
	}
	got := string(b[i+len(begin) : j])
	if got == want {
		return
	}
	if !*update {
		t.Fatalf("%s's package graph is out of date: run go test ./internal/arch -update", path)
	}
	out := append(append(append([]byte{}, b[:i+len(begin)]...), want...), b[j:]...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}
