// Package arch states memcgd's package layering and checks the tree
// against it (arch_test.go): the pure core imports nothing that does I/O
// or reads a clock, and no package imports one from a layer above its
// own. Graph renders the package graph for docs/architecture.md.
package arch

import (
	"fmt"
	"slices"
	"strings"
)

// Module is the module path.
const Module = "github.com/memcgd/memcgd"

// A Layer holds packages that may import those of lower layers only (and,
// within a layer, the ones listed before them).
type Layer struct {
	Name string
	// Packages are import paths relative to the module; a trailing "/..."
	// matches the package and every package below it.
	Packages []string
}

// Layers are memcgd's layers, lowest first.
var Layers = []Layer{
	{"leaf helpers", []string{"internal/suggest", "internal/strictyaml", "internal/stats"}},
	{"values", []string{"memcg", "host", "state"}},
	{"pure core", []string{"policy", "config", "resolve", "sched"}},
	{"kernel model", []string{"sim/kernel", "sim/workload"}},
	{"support", []string{"atomicfile", "internal/pollfd", "internal/cputime", "cgroupfs/format", "overrides", "hostcall"}},
	{"real kernel", []string{"cgroupfs/...", "internal/sandbox", "cgroupfs/cgrouptest"}},
	{"daemon", []string{"agent", "control", "metrics"}},
	{"simulator", []string{"sim/scenario", "sim/daemon", "sim/run", "sim/report", "sim/sweep"}},
	{"commands", []string{"cmd/...", "deploy/..."}},
	{"tests and experiments", []string{"internal/...", "test/...", "experiments/..."}},
}

// Pure are the packages that must do no I/O, read no clock and start no
// goroutine: they run the same against the real kernel and the
// simulator, and are tested on fake time.
var Pure = []string{"memcg", "policy", "sched", "sim/kernel"}

// PureLayers are the layers whose packages a pure package may import.
var PureLayers = []string{"leaf helpers", "values", "pure core"}

// PureImports are the standard packages a pure package may import.
var PureImports = []string{
	"cmp", "container/heap", "errors", "fmt", "log/slog", "maps", "math", "math/bits", "path",
	"slices", "sort", "strconv", "strings", "time", "unicode/utf8",
}

// Clock are the functions of package time that read the clock or wait.
var Clock = []string{"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "NewTimer", "NewTicker", "Tick"}

// Rank returns the layer of pkg (relative to the module) and its order
// within it, or ok false when no layer holds it.
func Rank(pkg string) (layer, order int, ok bool) {
	best := -1
	for i, l := range Layers {
		for j, p := range l.Packages {
			if prefix, all := strings.CutSuffix(p, "/..."); all && (pkg == prefix || strings.HasPrefix(pkg, prefix+"/")) || p == pkg {
				// An exact name wins over a wildcard of a lower layer.
				if best < 0 || p == pkg {
					layer, order, best = i, j, i
				}
			}
		}
	}
	return layer, order, best >= 0
}

// Allowed reports whether pkg may import dep, both relative to the module.
func Allowed(pkg, dep string) error {
	pl, po, ok := Rank(pkg)
	if !ok {
		return fmt.Errorf("%s is in no layer of arch.Layers", pkg)
	}
	dl, do, ok := Rank(dep)
	if !ok {
		return fmt.Errorf("%s (imported by %s) is in no layer of arch.Layers", dep, pkg)
	}
	same := Layers[pl].Packages[po] == Layers[dl].Packages[do] // one wildcard
	if dl > pl || dl == pl && do > po && !same {
		return fmt.Errorf("%s (layer %q) imports %s (layer %q), which is above it", pkg, Layers[pl].Name, dep, Layers[dl].Name)
	}
	return nil
}

// Graph renders the import graph of pkgs (relative path → its imports
// within the module) as a Mermaid flowchart, one subgraph per layer.
func Graph(pkgs map[string][]string) string {
	var b strings.Builder
	b.WriteString("```mermaid\nflowchart BT\n")
	id := func(p string) string { return strings.NewReplacer("/", "_", "-", "_", ".", "_").Replace(p) }
	for i, l := range Layers {
		var in []string
		for p := range pkgs {
			if li, _, ok := Rank(p); ok && li == i {
				in = append(in, p)
			}
		}
		if len(in) == 0 {
			continue
		}
		slices.Sort(in)
		fmt.Fprintf(&b, "  subgraph L%d[%q]\n", i, l.Name)
		for _, p := range in {
			fmt.Fprintf(&b, "    %s[%s]\n", id(p), p)
		}
		b.WriteString("  end\n")
	}
	var names []string
	for p := range pkgs {
		names = append(names, p)
	}
	slices.Sort(names)
	for _, p := range names {
		deps := slices.Clone(pkgs[p])
		slices.Sort(deps)
		for _, d := range deps {
			fmt.Fprintf(&b, "  %s --> %s\n", id(p), id(d))
		}
	}
	b.WriteString("```\n")
	return b.String()
}

// Forbidden are imports a package may not have though the layers allow
// them: the kernel model must not import the code it is there to check.
var Forbidden = map[string][]string{
	"sim/kernel":   {"policy", "sched", "resolve", "config"},
	"sim/workload": {"policy", "sched", "resolve", "config"},
}
