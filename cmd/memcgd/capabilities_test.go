package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMissingCapabilities(t *testing.T) {
	tests := []struct {
		name   string
		capEff string
		want   []string
	}{
		{"all", "000001ffffffffff", nil},
		{"the unit before the fix", "0000000000080006", []string{"CAP_SYS_ADMIN", "CAP_SYS_RESOURCE", "CAP_BPF", "CAP_PERFMON"}},
		{"none", "0000000000000000", []string{"CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_SYS_PTRACE", "CAP_SYS_ADMIN", "CAP_SYS_RESOURCE", "CAP_BPF", "CAP_PERFMON"}},
	}
	for _, tt := range tests {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, "self"), 0o755); err != nil {
			t.Fatal(err)
		}
		status := "Name:\tmemcgd\nCapInh:\t0000000000000000\nCapEff:\t" + tt.capEff + "\n"
		if err := os.WriteFile(filepath.Join(root, "self", "status"), []byte(status), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := missingCapabilities(root)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range got {
			names = append(names, c.name)
		}
		if len(names) != len(tt.want) {
			t.Errorf("%s: missing %v, want %v", tt.name, names, tt.want)
			continue
		}
		for i := range names {
			if names[i] != tt.want[i] {
				t.Errorf("%s: missing %v, want %v", tt.name, names, tt.want)
				break
			}
		}
	}
}
