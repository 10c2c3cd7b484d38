package main

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/overrides"
)

// Defect 14: run without a daemon, `memcgd stat` ignored the overrides
// `memcgd set` persisted, and printed the config's knobs instead of those
// in force. On the real kernel: a cgroup with a 256 MiB limit, dirty_bytes
// 16M and dirty_background_bytes 8M set at run time.
func TestStatWithoutDaemonAppliesPersistedOverrides(t *testing.T) {
	l := realKernel(t)
	cg := cgrouptest.New(t, l, 256<<20)
	path := filepath.Join(t.TempDir(), "overrides.json")
	ov, err := overrides.Load(path, overrides.DirInode(l.Memory.Dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := ov.Set(cg.Path, map[string]string{"dirty_bytes": "16M", "dirty_background_bytes": "8M"}); err != nil {
		t.Fatal(err)
	}
	stat := func(overridesPath string) string {
		var out bytes.Buffer
		cmd := newRootCmd(&out, io.Discard)
		cmd.SetArgs([]string{"stat", "--socket", filepath.Join(t.TempDir(), "none.sock"), "--overrides", overridesPath, string(cg.Path)})
		if err := cmd.Execute(); err != nil {
			t.Fatalf("memcgd stat: %v", err)
		}
		return out.String()
	}
	tests := []struct {
		name      string
		overrides string
		want      []string
	}{
		{"with the overrides file", path, []string{
			"\ndirty_ratio 0\n", "\ndirty_bytes 16777216\n", "\ndirty_background_ratio 0\n", "\ndirty_background_bytes 8388608\n",
		}},
		{"without one: the default policy", filepath.Join(t.TempDir(), "none.json"), []string{
			"\ndirty_ratio 10\n", "\ndirty_bytes 0\n", "\ndirty_background_ratio 5\n",
		}},
	}
	for _, tt := range tests {
		got := stat(tt.overrides)
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: no %q in\n%s", tt.name, strings.TrimSpace(w), got)
			}
		}
	}
}
