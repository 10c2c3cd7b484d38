package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// memcgd sim --plot DIR lists the files it wrote on stderr, one path a
// line, and leaves stdout to the table.
func TestSimPlotListsFiles(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "cli.yaml")
	if err := os.WriteFile(f, []byte(cliScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	plots := filepath.Join(dir, "plots")
	var out, errb bytes.Buffer
	root := newRootCmd(&out, &errb)
	root.SetArgs([]string{"sim", f, "--plot", plots})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, n := range []string{"dirty", "usage", "throughput"} {
		want = append(want, filepath.Join(plots, n+".png"), filepath.Join(plots, n+".svg"))
	}
	if got := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stderr:\n%s\nwant the paths:\n%s", errb.String(), strings.Join(want, "\n"))
	}
	for _, p := range want {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("listed, not written: %v", err)
		}
	}
	if strings.Contains(out.String(), plots) || !strings.Contains(out.String(), "| first") {
		t.Errorf("stdout is not the table alone:\n%s", out.String())
	}
}
