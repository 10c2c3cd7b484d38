package cgrouptest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FakeHost lays out a procfs and cgroup mounts under a temporary root:
// files maps paths relative to the root to contents, with $ROOT in a
// content standing for the root; a path ending in "/" is a directory.
func FakeHost(t testing.TB, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		if strings.HasSuffix(p, "/") {
			p = filepath.Join(root, p)
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(content, "$ROOT", root)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}
