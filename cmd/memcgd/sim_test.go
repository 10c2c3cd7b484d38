package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func memcgdSim(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	root := newRootCmd(&out, &errb)
	root.SetArgs(append([]string{"sim"}, args...))
	err := root.Execute()
	return out.String(), err
}

const cliScenario = `version: 1
name: cli
until: 60s
machine: {memory: 2G, cgroup: v1}
disks: [{name: vda, write_bandwidth: 200M}]
cgroups: [{path: /w, limit: 32M}, {path: /idle, count: 20}]
workloads:
  - {name: others, kind: dirtier, cgroup: /idle, size: 64K}
  - {name: fio, kind: writer, cgroup: /w, size: 128M, block: 16K, start: 100ms}
variants: [{name: stock}, {name: first, kernel: [seed-000]}, {name: memcgd, memcgd: {interval: 50ms}}]
report: {table: seed-000, workload: fio}
`

// memcgd sim lists the embedded scenarios, runs a file with its variants
// in parallel and prints the same bytes every time, and refuses bad input
// with the reason.
func TestSimCommand(t *testing.T) {
	list, err := memcgdSim(t, "--list")
	if err != nil || !strings.Contains(list, "seed-000") || !strings.Contains(list, "e3-v2") {
		t.Fatalf("--list: %v\n%s", err, list)
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "cli.yaml")
	if err := os.WriteFile(f, []byte(cliScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	csv := filepath.Join(dir, "out", "series.csv")
	a, err := memcgdSim(t, f, "-j", "3", "--csv", csv, "--stat")
	if err != nil {
		t.Fatal(err)
	}
	b, err := memcgdSim(t, f, "-j", "1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a, b) || !strings.Contains(a, "| first") || !strings.Contains(a, "memory.stat of /w") {
		t.Errorf("parallel and serial runs differ, or the table is missing:\n%s\n---\n%s", a, b)
	}
	if st, err := os.Stat(csv); err != nil || st.Size() == 0 {
		t.Errorf("--csv: %v", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"seed-999"}, "no embedded scenario \"seed-999\": allowed "},
		{[]string{f, "--set", "cgroups[0].limit=lots"}, "cgroups[0].limit"},
		{[]string{f, "--set", "nonsense"}, "path=value"},
		{[]string{f, "--variant", "nope"}, `--variant: no variant "nope" in scenario cli: allowed stock, first, memcgd`},
		{[]string{"sweep", f, "--shard", "3/3"}, "0 <= i < n"},
	} {
		if _, err := memcgdSim(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one mentioning %q", tc.args, err, tc.want)
		}
	}
}

// memcgd sim sweep --output writes the bytes it prints without it: the
// Indexed Job's pods (deploy/sim-sweep-job.yaml) have no shell to redirect.
func TestSimSweepOutput(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "cli.yaml")
	if err := os.WriteFile(f, []byte(cliScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"sweep", f, "--set", "cgroups[0].limit=32M,64M", "--shard", "1/2", "-j", "2"}
	stdout, err := memcgdSim(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "results", "shard-1.csv")
	if printed, err := memcgdSim(t, append(args, "--output", out)...); err != nil || printed != "" {
		t.Fatalf("with --output: printed %q, error %v; want nothing printed", printed, err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != stdout || !strings.Contains(stdout, "\n") {
		t.Errorf("--output wrote\n%s\nwant what the sweep prints:\n%s", b, stdout)
	}
}
