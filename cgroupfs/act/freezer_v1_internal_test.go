package act

import (
	"errors"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
)

// Which tasks of the memory cgroup /yarn/app1 EnsureFreezer moves: only
// those a freeze of the freezer cgroup /yarn/app1 would miss and whose
// freezer cgroup is an ancestor, which no manager chose for them.
func TestPlaceTask(t *testing.T) {
	const cg host.Cgroup = "/yarn/app1"
	tests := []struct {
		name            string
		memory, freezer host.Cgroup
		want            taskPlacement
	}{
		{"memory-only cgroup: the task sits in the freezer root", "/yarn/app1", "/", taskMove},
		{"a descendant's task in the freezer root", "/yarn/app1/worker", "/", taskMove},
		{"the task in an ancestor freezer cgroup", "/yarn/app1", "/yarn", taskMove},
		{"already in the freezer cgroup at the same path", "/yarn/app1", "/yarn/app1", taskStays},
		{"in a freezer cgroup beneath it", "/yarn/app1", "/yarn/app1/x", taskStays},
		{"placed in another freezer cgroup by someone", "/yarn/app1", "/docker/abc", taskForeign},
		{"placed in a sibling freezer cgroup", "/yarn/app1", "/yarn/app2", taskForeign},
		{"a common prefix is not an ancestor", "/yarn/app1", "/yarn/app", taskForeign},
		{"left the memory cgroup since it was listed", "/other", "/", taskStays},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := placeTask(cg, tt.memory, tt.freezer); got != tt.want {
				t.Errorf("placeTask(%s, memory %s, freezer %s) = %d, want %d", cg, tt.memory, tt.freezer, got, tt.want)
			}
		})
	}
}

// EnsureFreezer names what is missing, as a *ThrottleUnavailable, and
// refuses paths that are not clean, before touching anything.
func TestEnsureFreezerRefuses(t *testing.T) {
	v1 := layout.Layout{Memory: layout.Hierarchy{Version: layout.V1, Mount: "/nonexistent/memory", Root: "/"}}
	withFreezer := v1
	withFreezer.Freezer = &layout.Hierarchy{Version: layout.V1, Mount: "/nonexistent/freezer", Root: "/kubepods"}
	v2 := layout.Layout{Memory: layout.Hierarchy{Version: layout.V2, Mount: "/nonexistent/unified", Root: "/"}}
	tests := []struct {
		name        string
		l           layout.Layout
		cg          host.Cgroup
		unavailable bool // a *ThrottleUnavailable; otherwise another error
	}{
		{"no freezer hierarchy", v1, "/svc", true},
		{"the root", withFreezer, "/", true},
		{"outside the mounted freezer subtree", withFreezer, "/system.slice/x", true},
		{"dot-dot", withFreezer, "/kubepods/../etc", false},
		{"relative", withFreezer, "kubepods/a", false},
		{"trailing slash", withFreezer, "/kubepods/a/", false},
		{"v2 has its own cgroup.freeze", v2, "/svc", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := EnsureFreezer(tt.l, "/nonexistent/proc", tt.cg)
			var tu *ThrottleUnavailable
			if err == nil || errors.As(err, &tu) != tt.unavailable {
				t.Fatalf("EnsureFreezer(%s) = %+v, %v; want an error, *ThrottleUnavailable: %v", tt.cg, m, err, tt.unavailable)
			}
			if tt.unavailable && !errors.Is(err, errors.ErrUnsupported) {
				t.Errorf("error %v does not unwrap to errors.ErrUnsupported", err)
			}
			if len(m.Made) != 0 || len(m.Moved) != 0 {
				t.Errorf("EnsureFreezer made %v and moved %v; want nothing touched", m.Made, m.Moved)
			}
			t.Logf("%v", err)
		})
	}
}
