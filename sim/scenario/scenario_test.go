package scenario

import (
	"errors"
	"strings"
	"testing"
)

const base = `version: 1
name: t
machine:
  memory: 4G
  cgroup: v1
disks:
  - name: vda
    write_bandwidth: 200M
cgroups:
  - path: /w
    limit: 64M
workloads:
  - name: dd
    kind: writer
    cgroup: /w
    size: 1G
`

// Every error names the line, the field, the value and what is allowed.
func TestValidationErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key", strings.Replace(base, "  memory: 4G", "  memroy: 4G", 1), []string{`scenario line 4: unknown field "memroy" in machine: allowed memory, reserved,`, `did you mean "memory"?`}},
		{"bad size", strings.Replace(base, "limit: 64M", "limit: 64Q", 1), []string{"line 11", "cgroups[0].limit", `"64Q"`, "a size"}},
		{"bad cgroup version", strings.Replace(base, "cgroup: v1", "cgroup: v3", 1), []string{"line 5", "machine.cgroup", `"v3"`, "v1, v2"}},
		{"bad duration", base + "until: 10 minutes\n", []string{"line 17", "until", `"10 minutes"`, "duration"}},
		{"unknown workload kind", strings.Replace(base, "kind: writer", "kind: typist", 1), []string{"line 14", "workloads[0].kind", `"typist"`, "writer, reader"}},
		{"undefined cgroup", strings.Replace(base, "cgroup: /w\n", "cgroup: /x\n", 1), []string{"line 15", "workloads[0].cgroup", `"/x"`, "listed under cgroups"}},
		{"parent missing", strings.Replace(base, "path: /w", "path: /a/w", 1), []string{"line 10", "cgroups[0].path", "parent /a"}},
		{"bad knob", strings.Replace(base, "limit: 64M", "limit: 64M\n    knobs: {dirty_ratio: 120}", 1), []string{"line 12", "cgroups[0].knobs.dirty_ratio", `"120"`, "0 to 100"}},
		{"high on v1", strings.Replace(base, "limit: 64M", "limit: 64M\n    high: 32M", 1), []string{"line 12", "cgroups[0].high", "v2 only"}},
		{"bad seed kernel", base + "variants:\n  - name: x\n    kernel: [seed-002]\n", []string{"line 19", "variants[0].kernel[0]", `"seed-002"`, "seed-000"}},
		{"memcgd with seed kernel", base + "variants:\n  - name: x\n    kernel: [seed-000]\n    memcgd: {interval: 50ms}\n", []string{"line 19", "variants[0].kernel", "stock kernel"}},
		{"wrong version", strings.Replace(base, "version: 1", "version: 2", 1), []string{"line 1", "version", `"2"`}},
		{"missing version", strings.Replace(base, "version: 1\n", "", 1), []string{"version", "missing"}},
		{"no size", strings.Replace(base, "    size: 1G\n", "", 1), []string{"workloads[0].size", "positive size"}},
		{"list for scalar", strings.Replace(base, "memory: 4G", "memory: [4G]", 1), []string{"line 4", "single value"}},
		{"a memcgd key that is gone", base + "variants:\n  - name: x\n    memcgd: {driver: agent}\n", []string{"line 19", "driver"}},
		{"bad tracker", base + "variants:\n  - name: x\n    memcgd: {tracker: yes}\n", []string{"line 19", "variants[0].memcgd.tracker", `"yes"`, "true, false"}},
		{"bad warmup", base + "report: {warmup: soon}\n", []string{"line 17", "report.warmup", `"soon"`, "duration"}},
		{"duplicate variant", base + "variants:\n  - name: x\n  - name: x\n", []string{"line 19", "variants[1].name", `"x"`}},
		{"bad cpu.max", base + "cpu_groups:\n  - {path: /w/dd, max: 500 100000}\n", []string{"line 18", "cpu_groups[0].max", `"500 100000"`, "at least 1000 us"}},
		{"bad cpu.max period", base + "cpu_groups:\n  - {path: /w/dd, max: max 2000000}\n", []string{"line 18", "cpu_groups[0].max", "1000 to 1000000"}},
		{"unlisted cpu group", strings.Replace(base, "    size: 1G\n", "    size: 1G\n    cpu_group: /w/dd\n", 1), []string{"line 17", "workloads[0].cpu_group", `"/w/dd"`, "listed under cpu_groups"}},
		{"cpu_max of an unlisted group", base + "variants:\n  - name: x\n    cpu_max: {/y: 1000 100000}\n", []string{"line 19", "variants[0].cpu_max", `"/y"`, "listed under cpu_groups"}},
		{"wal without a duration", base + "  - {name: db, kind: wal, cgroup: /w, block: 4K}\n", []string{"line 17", "workloads[1].duration", "positive duration"}},
		{"bad journal commit", strings.Replace(base, "  cgroup: v1", "  cgroup: v1\n  journal_commit: 1000", 1), []string{"line 6", "machine.journal_commit", `"1000"`, "multiple of the 4K page"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatalf("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestBaseIsValid(t *testing.T) {
	s, err := Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if s.Machine.Memory != 4<<30 || s.Cgroups[0].Limit != 64<<20 || s.Workloads[0].Size != 1<<30 || s.Variants[0].Name != "stock" {
		t.Fatalf("parsed %+v", s)
	}
}

func TestEmbeddedScenariosParse(t *testing.T) {
	names := Names()
	for _, want := range []string{"seed-000", "seed-001", "seed-004"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("no embedded scenario %s in %v", want, names)
		}
	}
	for _, n := range names {
		b, err := Embedded(n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(b); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
}

func TestSet(t *testing.T) {
	s, err := Parse([]byte(base), Assignment{"cgroups[0].limit", "200M"}, Assignment{"machine.dirty_ratio", "5"},
		Assignment{"workloads[0].rate", "100M"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Cgroups[0].Limit != 200<<20 || s.Machine.DirtyRatio != 5 || s.Workloads[0].Rate != 100<<20 {
		t.Fatalf("sets not applied: %+v %+v", s.Cgroups[0], s.Machine)
	}
}

// A --set that cannot apply, or gives a value the field refuses, names the
// argument as given and never a line of the YAML it was applied to.
func TestSetErrors(t *testing.T) {
	tests := []struct {
		name string
		set  []Assignment
		want string
	}{
		{"an unknown field", []Assignment{{"cgroups[0].limt", "200M"}},
			`--set cgroups[0].limt=200M: unknown field "limt" in cgroups[0]: allowed path, limit, high, count, knobs; did you mean "limit"?`},
		{"an unknown top-level field", []Assignment{{"sede", "3"}},
			`--set sede=3: unknown field "sede": allowed version, name, description, seed, until, sample, machine, disks, cgroups, cpu_groups, workloads, variants, report; did you mean "seed"?`},
		{"an unknown field in a mapping the file lacks", []Assignment{{"report.focsu", "/w"}},
			`--set report.focsu=/w: unknown field "focsu" in report: allowed table, focus, workload, warmup; did you mean "focus"?`},
		{"a bad value", []Assignment{{"machine.memory", "1G"}, {"cgroups[0].limit", "lots"}},
			`--set cgroups[0].limit=lots: cgroups[0].limit: invalid value "lots": allowed a size such as 4096, 16K, 100M or 20G (binary units)`},
		{"a bad value in a field the file has", []Assignment{{"machine.cgroup", "v3"}},
			`--set machine.cgroup=v3: machine.cgroup: invalid value "v3": allowed one of v1, v2`},
		{"an unknown knob", []Assignment{{"cgroups[0].knobs.dirty_ratoi", "5"}},
			`--set cgroups[0].knobs.dirty_ratoi=5: cgroups[0].knobs: unknown knob "dirty_ratoi": allowed dirty_ratio, dirty_bytes, dirty_background_ratio, dirty_background_bytes, min_free_kbytes, writeback_first; did you mean "dirty_ratio"?`},
		{"a bad knob value", []Assignment{{"cgroups[0].knobs.dirty_ratio", "500"}},
			`--set cgroups[0].knobs.dirty_ratio=500: cgroups[0].knobs.dirty_ratio: invalid value "500": allowed an integer percentage from 0 to 100`},
		{"an element past the end", []Assignment{{"cgroups[3].limit", "1G"}},
			`--set cgroups[3].limit=1G: cgroups has no element 3: allowed only cgroups[0]`},
		{"an index on a mapping", []Assignment{{"machine[0].memory", "1G"}},
			`--set machine[0].memory=1G: machine is not a list: allowed machine without an index`},
		{"a list without an index", []Assignment{{"cgroups.limit", "1G"}},
			`--set cgroups.limit=1G: cgroups: want a mapping in the scenario, not a list`},
		{"a mapping set to a value", []Assignment{{"machine", "x"}},
			`--set machine=x: machine holds more than one value: allowed a path to one of its fields, such as machine.memory`},
		{"a list the file lacks", []Assignment{{"variants[0].name", "x"}},
			`--set variants[0].name=x: variants has no element 0: allowed none: the scenario lists no variants`},
		{"a field of a value", []Assignment{{"seed.x", "1"}},
			`--set seed.x=1: seed is a single value: it has no field "x"`},
		{"a bad index", []Assignment{{"cgroups[x].limit", "1G"}},
			`--set cgroups[x].limit=1G: "[x]" is not a list index: allowed [0], [1], ...`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(base), tt.set...)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Parse error\n %v\nwant\n %s", err, tt.want)
			}
			if !errors.As(err, new(*SetError)) {
				t.Errorf("error %v (%T), want a *SetError", err, err)
			}
		})
	}
	// A bad value in the file itself is still the file's, at its line,
	// with sets given.
	_, err := Parse([]byte(strings.Replace(base, "limit: 64M", "limit: 64Q", 1)), Assignment{"machine.memory", "8G"})
	if err == nil || err.Error() != `scenario line 11: cgroups[0].limit: invalid value "64Q": allowed a size such as 4096, 16K, 100M or 20G (binary units)` || errors.As(err, new(*SetError)) {
		t.Errorf("a bad value of the file's, with a set: %v", err)
	}
	if _, err := ParseAssignment("nonsense"); err == nil || err.Error() != `--set nonsense: want path=value, such as cgroups[0].limit=100M` {
		t.Errorf("ParseAssignment(nonsense) = %v", err)
	}
}

func TestSelectVariants(t *testing.T) {
	s, err := Parse([]byte(base + "variants: [{name: stock}, {name: first, kernel: [seed-000]}, {name: memcgd, memcgd: {}}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = s.SelectVariants([]string{"memcgd", "frist"})
	if err == nil || err.Error() != `no variant "frist" in scenario t: allowed stock, first, memcgd; did you mean "first"?` {
		t.Errorf("SelectVariants(frist) = %v", err)
	}
	if err := s.SelectVariants([]string{"memcgd", "stock"}); err != nil || len(s.Variants) != 2 || s.Variants[0].Name != "memcgd" || s.Variants[1].Name != "stock" {
		t.Errorf("SelectVariants(memcgd, stock) = %v, %+v", err, s.Variants)
	}
	if _, err := Embedded("seed-00"); err == nil || !strings.Contains(err.Error(), `allowed build-vs-dd, `) || !strings.HasSuffix(err.Error(), `; did you mean "seed-000"?`) {
		t.Errorf("Embedded(seed-00) = %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(base))
	for _, n := range Names() {
		b, _ := Embedded(n)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err == nil && s == nil {
			t.Fatal("nil scenario without error")
		}
	})
}
