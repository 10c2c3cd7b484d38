package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// source is what the image is built from.
type source struct {
	version, revision string
	modified          bool
	time              time.Time // the commit's, or SOURCE_DATE_EPOCH
}

// gitSource reads root's HEAD as the Go toolchain stamps a build from it
// (cmd/go/internal/modload, the main module's version): a v* tag on HEAD,
// else the pseudo-version v0.0.0-<commit time, UTC>-<12 hex digits of the
// commit>; "+dirty" for a tree with uncommitted changes. Without git or a
// repository it returns an empty source and no error: the flags then
// supply what is known.
func gitSource(root string) (source, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", append([]string{"-C", root}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return strings.TrimSpace(string(out)), nil
	}
	if _, err := exec.LookPath("git"); err != nil {
		return source{}, nil
	}
	if _, err := git("rev-parse", "--git-dir"); err != nil {
		return source{}, nil
	}
	var s source
	var err error
	if s.revision, err = git("rev-parse", "HEAD"); err != nil {
		return s, err
	}
	ct, err := git("log", "-1", "--format=%ct", "HEAD")
	if err != nil {
		return s, err
	}
	secs, err := strconv.ParseInt(ct, 10, 64)
	if err != nil {
		return s, fmt.Errorf("git log: commit time %q: %w", ct, err)
	}
	s.time = time.Unix(secs, 0).UTC()
	status, err := git("status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return s, err
	}
	s.modified = status != ""
	if tag, err := git("describe", "--tags", "--exact-match", "--match", "v*", "HEAD"); err == nil {
		s.version = tag
	} else {
		s.version = "v0.0.0-" + s.time.Format("20060102150405") + "-" + s.revision[:12]
	}
	if s.modified {
		s.version += "+dirty"
	}
	return s, nil
}

// sourceDateEpoch is SOURCE_DATE_EPOCH (reproducible-builds.org), if set.
func sourceDateEpoch() (time.Time, bool, error) {
	v := os.Getenv("SOURCE_DATE_EPOCH")
	if v == "" {
		return time.Time{}, false, nil
	}
	secs, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("SOURCE_DATE_EPOCH: invalid value %q: allowed seconds since the Unix epoch", v)
	}
	return time.Unix(secs, 0).UTC(), true, nil
}
