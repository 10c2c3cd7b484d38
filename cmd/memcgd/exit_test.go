package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The exit status is the specification README.md's "Exit status" states:
// 0 on success, 1 when the command fails, 2 for a wrong command line. The
// command tree runs in-process; no case needs root, a daemon or a change
// to the host (the run cases are refused before the daemon starts).
func TestExitStatus(t *testing.T) {
	dir := t.TempDir()
	none := filepath.Join(dir, "none.sock")
	badConfig := filepath.Join(dir, "bad.yaml")
	badScenario := filepath.Join(dir, "bad-scenario.yaml")
	for name, text := range map[string]string{badConfig: "version: 1\ndefualts: {}\n", badScenario: "version: 1\nmachine: {memroy: 1G}\n"} {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		args      []string
		code      int
		stderrHas string // on the first line
	}{
		{nil, exitOK, ""},
		{[]string{"--help"}, exitOK, ""},
		{[]string{"help", "stat"}, exitOK, ""},
		{[]string{"version"}, exitOK, ""},
		{[]string{"sim", "--list"}, exitOK, ""},
		{[]string{"completion", "bash"}, exitOK, ""},
		{[]string{"completion", "zsh"}, exitOK, ""},
		{[]string{"completion", "fish"}, exitOK, ""},

		// A wrong command line: nothing was done.
		{[]string{"bogus"}, exitUsage, `unknown command "bogus" for "memcgd"`},
		{[]string{"stats"}, exitUsage, "Did you mean this?"},
		{[]string{"stat", "--bogus"}, exitUsage, "unknown flag: --bogus\n"},
		{[]string{"stat", "--sokcet", "x"}, exitUsage, "unknown flag: --sokcet; did you mean --socket?"},
		{[]string{"version", "extra"}, exitUsage, `unknown command "extra" for "memcgd version"`},
		{[]string{"version", "--config", "x"}, exitUsage, "unknown flag: --config"},
		{[]string{"sim", "--proc", "/proc"}, exitUsage, "unknown flag: --proc"},
		{[]string{"completion", "tcsh"}, exitUsage, `unknown command "tcsh" for "memcgd completion"`},
		{[]string{"get"}, exitUsage, "accepts 1 arg(s), received 0"},
		{[]string{"get", "/a", "/b"}, exitUsage, "accepts 1 arg(s), received 2"},
		{[]string{"stat", "/a", "/b"}, exitUsage, "accepts at most 1 arg(s), received 2"},
		{[]string{"set", "/"}, exitUsage, "want at least one knob=value"},
		{[]string{"set", "--reset", "/", "dirty_ratio=1"}, exitUsage, "want CGROUP only"},
		{[]string{"set", "--socket", none, "/", "dirty_ratio"}, exitUsage, `argument "dirty_ratio": want knob=value`},
		{[]string{"set", "--socket", none, "/", "dirty_ratoi=1"}, exitUsage, `unknown knob "dirty_ratoi"`},
		{[]string{"set", "--socket", none, "/", "dirty_ratio=101"}, exitUsage, `argument "dirty_ratio=101": dirty_ratio: invalid value "101"`},
		{[]string{"run", "extra"}, exitUsage, `unknown command "extra" for "memcgd run"`},
		{[]string{"run", "--listen", "0.0.0.0:9717"}, exitUsage, "--allow-non-loopback"},
		{[]string{"run", "--listen", "9717"}, exitUsage, `--listen: invalid value "9717": allowed HOST:PORT`},
		{[]string{"run", "--log-level", "loud"}, exitUsage, `--log-level: invalid value "loud"`},
		{[]string{"run", "--dirty-tracker", "maybe"}, exitUsage, `--dirty-tracker: invalid value "maybe"`},
		{[]string{"run", "--sched-slice", "1ns"}, exitUsage, "--sched-slice: invalid value 1ns"},
		{[]string{"run", "--workers", "0"}, exitUsage, "--workers: invalid value 0"},
		{[]string{"run", "--workers", "many"}, exitUsage, `--workers: invalid value "many": allowed an integer`},
		{[]string{"run", "--paced-report-gap", "-1ms"}, exitUsage, "--paced-report-gap: invalid value -1ms: allowed 0 (every wake-up at once) to 5ms"},
		{[]string{"run", "--paced-report-gap", "6ms"}, exitUsage, "--paced-report-gap: invalid value 6ms: allowed 0"},
		{[]string{"run", "--write-out-gap", "-1ms"}, exitUsage, "--write-out-gap: invalid value -1ms: allowed 0 (back to back) to 1ms"},
		{[]string{"run", "--write-out-gap", "2ms"}, exitUsage, "--write-out-gap: invalid value 2ms: allowed 0"},
		{[]string{"run", "--reaction", "soon"}, exitUsage, `--reaction: invalid value "soon": allowed a duration such as 300us, 50ms or 2s`},
		{[]string{"sim", "seed-00"}, exitUsage, `no embedded scenario "seed-00"`},
		{[]string{"sim", "seed-000", "--variant", "bogus"}, exitUsage, `--variant: no variant "bogus" in scenario seed-000`},
		{[]string{"sim", "seed-000", "--set", "cgroups[0].limt=1"}, exitUsage, `--set cgroups[0].limt=1: unknown field "limt"`},
		{[]string{"sim", "seed-000", "--set", "nonsense"}, exitUsage, "--set nonsense: want path=value"},
		{[]string{"sim", "seed-000", "--seed", "x"}, exitUsage, `--seed: invalid value "x": allowed an integer`},
		{[]string{"sim", "a", "b"}, exitUsage, "accepts at most 1 arg(s), received 2"},
		{[]string{"sim", "sweep"}, exitUsage, "accepts 1 arg(s), received 0"},
		{[]string{"sim", "sweep", "seed-000", "--shard", "3/3"}, exitUsage, "0 <= i < n"},
		{[]string{"sim", "sweep", "merge"}, exitUsage, "requires at least 1 arg(s)"},

		// The command ran and failed.
		{[]string{"get", "--socket", none, "/"}, exitFailure, ""},
		{[]string{"set", "--socket", none, "/", "dirty_ratio=15"}, exitFailure, ""},
		{[]string{"stat", "--socket", none, "--config", badConfig}, exitFailure, ""},
		{[]string{"sim", badScenario}, exitFailure, `unknown field "memroy" in machine`},
		{[]string{"sim", filepath.Join(dir, "missing.yaml")}, exitFailure, "read scenario"},
		{[]string{"sim", "sweep", "merge", filepath.Join(dir, "missing.csv")}, exitFailure, "open shard"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := execute(context.Background(), tt.args, &stdout, &stderr)
			if code != tt.code {
				t.Fatalf("exit status %d, want %d; stderr:\n%s", code, tt.code, stderr.String())
			}
			first, rest, _ := strings.Cut(stderr.String(), "\n")
			switch tt.code {
			case exitOK:
				if stderr.Len() > 0 {
					t.Errorf("stderr on success: %s", stderr.String())
				}
			case exitUsage:
				if !strings.HasPrefix(first, "memcgd: ") || !strings.Contains(stderr.String(), tt.stderrHas) {
					t.Errorf("stderr = %q, want \"memcgd: ...%s...\"", stderr.String(), tt.stderrHas)
				}
				if !strings.HasSuffix(rest, "--help' for usage.\n") {
					t.Errorf("stderr = %q, want it to end with where the help is", stderr.String())
				}
			case exitFailure:
				if !strings.HasPrefix(first, "memcgd: ") || !strings.Contains(first, tt.stderrHas) || rest != "" {
					t.Errorf("stderr = %q, want one line \"memcgd: ...%s...\"", stderr.String(), tt.stderrHas)
				}
			}
		})
	}
}
