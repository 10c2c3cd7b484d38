package main

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/memcgd/memcgd/metrics"
)

const rev = "f932fbef8ff1e81aaeaa44b3041e0f894370d556"

// What `memcgd version` and memcgd_build_info say, from the link-time
// values and the toolchain's build info.
func TestReadBuild(t *testing.T) {
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/memcgd/memcgd", Version: "v0.0.0-20261201154200-f932fbef8ff1+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"},
		},
	}
	unstamped := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/memcgd/memcgd", Version: "(devel)"}}
	tests := []struct {
		name   string
		linked build
		bi     *debug.BuildInfo
		ok     bool
		want   build
		line   string
		labels metrics.BuildInfo
	}{
		{
			name: "the toolchain's VCS stamp, a modified tree",
			bi:   stamped, ok: true,
			want:   build{Version: "v0.0.0-20261201154200-f932fbef8ff1+dirty", Revision: rev, Modified: true, GoVersion: "go1.26.8"},
			line:   "memcgd v0.0.0-20261201154200-f932fbef8ff1+dirty revision " + rev + " (modified) go1.26.8",
			labels: metrics.BuildInfo{Version: "v0.0.0-20261201154200-f932fbef8ff1+dirty", Revision: rev + "-modified", GoVersion: "go1.26.8"},
		},
		{
			name:   "link-time values win over the stamp",
			linked: build{Version: "v0.1.0", Revision: "0123456789abcdef0123456789abcdef01234567"},
			bi:     stamped, ok: true,
			want:   build{Version: "v0.1.0", Revision: "0123456789abcdef0123456789abcdef01234567", GoVersion: "go1.26.8"},
			line:   "memcgd v0.1.0 revision 0123456789abcdef0123456789abcdef01234567 go1.26.8",
			labels: metrics.BuildInfo{Version: "v0.1.0", Revision: "0123456789abcdef0123456789abcdef01234567", GoVersion: "go1.26.8"},
		},
		{
			name: "no stamp (a worktree, -buildvcs=false)",
			bi:   unstamped, ok: true,
			want:   build{Version: "devel", GoVersion: "go1.26.8"},
			line:   "memcgd devel go1.26.8",
			labels: metrics.BuildInfo{Version: "devel", GoVersion: "go1.26.8"},
		},
		{
			name:   "no build info",
			want:   build{Version: "devel", GoVersion: runtime.Version()},
			line:   "memcgd devel " + runtime.Version(),
			labels: metrics.BuildInfo{Version: "devel", GoVersion: runtime.Version()},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := readBuild(tt.linked, tt.bi, tt.ok)
			if got != tt.want {
				t.Errorf("readBuild = %+v, want %+v", got, tt.want)
			}
			if want := tt.line + " " + runtime.GOOS + "/" + runtime.GOARCH; got.String() != want {
				t.Errorf("String = %q, want %q", got.String(), want)
			}
			if got.metrics() != tt.labels {
				t.Errorf("metrics = %+v, want %+v", got.metrics(), tt.labels)
			}
		})
	}
}
