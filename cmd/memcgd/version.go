package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/memcgd/memcgd/metrics"
)

// version, revision and modified ("true" for a tree with uncommitted
// changes) are set at link time by the image builds (deploy/image, the
// Dockerfile): -ldflags "-X main.version=v0.1.0 -X main.revision=<commit>".
// The Go toolchain's own VCS stamp is missing from builds in a git
// worktree, whose .git is a file, with -buildvcs=false, and without .git
// in a Docker build context. Where unset, they come from
// debug.ReadBuildInfo.
var version, revision, modified string

// build is what this binary was built from.
type build struct {
	// Version is the module version: a tag, or Go's pseudo-version
	// (v0.0.0-<time>-<commit>, +dirty for a modified tree), or "devel".
	Version string
	// Revision is the VCS commit, "" when unknown; Modified says the
	// tree had uncommitted changes.
	Revision  string
	Modified  bool
	GoVersion string
}

// readBuild returns the binary's build: linked's version and revision (the
// link-time values) where set, the build info's where not (the main
// module's version, vcs.revision and vcs.modified).
func readBuild(linked build, bi *debug.BuildInfo, ok bool) build {
	b := linked
	b.GoVersion = runtime.Version()
	if ok {
		b.GoVersion = bi.GoVersion
		if b.Version == "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch {
			case linked.Revision != "":
			case s.Key == "vcs.revision":
				b.Revision = s.Value
			case s.Key == "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if b.Version == "" {
		b.Version = "devel"
	}
	return b
}

// thisBuild is readBuild of the running binary.
func thisBuild() build {
	bi, ok := debug.ReadBuildInfo()
	return readBuild(build{Version: version, Revision: revision, Modified: modified == "true"}, bi, ok)
}

// metrics is b as memcgd_build_info's labels; a modified tree's revision
// is marked so, since the commit alone does not say what ran.
func (b build) metrics() metrics.BuildInfo {
	rev := b.Revision
	if b.Modified && rev != "" {
		rev += "-modified"
	}
	return metrics.BuildInfo{Version: b.Version, Revision: rev, GoVersion: b.GoVersion}
}

// String is the line `memcgd version` prints.
func (b build) String() string {
	s := "memcgd " + b.Version
	if b.Revision != "" {
		s += " revision " + b.Revision
		if b.Modified {
			s += " (modified)"
		}
	}
	return s + " " + b.GoVersion + " " + runtime.GOOS + "/" + runtime.GOARCH
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print memcgd's version, the VCS revision it was built from, and the Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), thisBuild())
			return err
		},
	}
}
