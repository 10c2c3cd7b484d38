package overrides

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
)

func TestOverridesSet(t *testing.T) {
	tests := []struct {
		name    string
		before  []map[string]string // earlier Sets of /a, all valid
		set     map[string]string
		cg      host.Cgroup // "/a" unless given
		want    map[string]string
		errHas  []string // the error names the field, the value and what is allowed
		knobErr bool     // the error is a *memcg.KnobError
		unknown bool     // the error is a *memcg.UnknownKnobError
	}{
		{
			name: "values are stored in the form memcg.Knobs.Get prints",
			set:  map[string]string{"dirty_bytes": "16M", "writeback_first": "0", "min_free_kbytes": "auto"},
			want: map[string]string{"dirty_bytes": "16777216", "writeback_first": "false", "min_free_kbytes": "auto"},
		},
		{
			name:   "a ratio replaces its bytes twin, as vm.dirty_ratio zeroes vm.dirty_bytes",
			before: []map[string]string{{"dirty_bytes": "16M", "dirty_background_bytes": "8M"}},
			set:    map[string]string{"dirty_ratio": "15"},
			want:   map[string]string{"dirty_ratio": "15", "dirty_background_bytes": "8388608"},
		},
		{
			name:   "a bytes value replaces its ratio twin",
			before: []map[string]string{{"dirty_ratio": "15", "dirty_background_ratio": "5"}},
			set:    map[string]string{"dirty_background_bytes": "4M"},
			want:   map[string]string{"dirty_ratio": "15", "dirty_background_bytes": "4194304"},
		},
		{
			name:   "later sets add to earlier ones",
			before: []map[string]string{{"min_free_kbytes": "2862"}},
			set:    map[string]string{"dirty_ratio": "40"},
			want:   map[string]string{"min_free_kbytes": "2862", "dirty_ratio": "40"},
		},
		{
			name:    "both halves of a pair at once change nothing",
			before:  []map[string]string{{"dirty_ratio": "15"}},
			set:     map[string]string{"dirty_ratio": "20", "dirty_bytes": "16M"},
			want:    map[string]string{"dirty_ratio": "15"},
			errHas:  []string{"dirty_bytes", `"16M"`, "only one of dirty_ratio and dirty_bytes"},
			knobErr: true,
		},
		{
			name:    "one bad value changes nothing, not even the good ones",
			before:  []map[string]string{{"dirty_ratio": "15"}},
			set:     map[string]string{"dirty_ratio": "30", "min_free_kbytes": "300000"},
			want:    map[string]string{"dirty_ratio": "15"},
			errHas:  []string{"min_free_kbytes", `"300000"`, "262144"},
			knobErr: true,
		},
		{
			name:    "unknown knob",
			set:     map[string]string{"dirty_expire_centisecs": "3000"},
			want:    map[string]string{},
			errHas:  []string{`unknown knob "dirty_expire_centisecs"`, "dirty_ratio, dirty_bytes"},
			unknown: true,
		},
		{
			name:   "no knobs",
			set:    map[string]string{},
			want:   map[string]string{},
			errHas: []string{"/a", "no knobs", "name=value"},
		},
		{
			name:   "a relative cgroup path",
			cg:     "a/b",
			set:    map[string]string{"dirty_ratio": "15"},
			want:   map[string]string{},
			errHas: []string{"cgroup", `"a/b"`, "clean hierarchy path"},
		},
		{
			name:   "an unclean cgroup path",
			cg:     "/a/../b",
			set:    map[string]string{"dirty_ratio": "15"},
			want:   map[string]string{},
			errHas: []string{"cgroup", `"/a/../b"`, "clean hierarchy path"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := Load(filepath.Join(t.TempDir(), "overrides.json"), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range tt.before {
				if err := o.Set("/a", b); err != nil {
					t.Fatalf("Set(/a, %v): %v", b, err)
				}
			}
			cg := tt.cg
			if cg == "" {
				cg = "/a"
			}
			err = o.Set(cg, tt.set)
			checkErr(t, err, tt.errHas)
			// A bad knob comes back as a *memcg.KnobError, so that the
			// control socket can send its field and value apart.
			var ke *memcg.KnobError
			if got := errors.As(err, &ke); got != tt.knobErr {
				t.Errorf("error %v: is a *memcg.KnobError %v, want %v", err, got, tt.knobErr)
			}
			var ue *memcg.UnknownKnobError
			if got := errors.As(err, &ue); got != tt.unknown {
				t.Errorf("error %v: is a *memcg.UnknownKnobError %v, want %v", err, got, tt.unknown)
			}
			if got := o.Get("/a"); !maps.Equal(got, tt.want) {
				t.Errorf("Get(/a) = %v, want %v", got, tt.want)
			}
			// What is in force is what a restarted daemon reads back.
			again, err := Load(o.Path(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := again.Get("/a"); !maps.Equal(got, tt.want) {
				t.Errorf("after reload Get(/a) = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestOverridesApply(t *testing.T) {
	configured := memcg.Knobs{DirtyRatio: 10, DirtyBackgroundRatio: 5, MinFreeKbytes: memcg.MinFreeAuto, WritebackFirst: true}
	tests := []struct {
		name string
		set  map[string]string
		want memcg.Knobs
	}{
		{"no overrides: the configured knobs", nil, configured},
		{
			"dirty_bytes zeroes the configured dirty_ratio",
			map[string]string{"dirty_bytes": "16M"},
			memcg.Knobs{DirtyBytes: 16 << 20, DirtyBackgroundRatio: 5, MinFreeKbytes: memcg.MinFreeAuto, WritebackFirst: true},
		},
		{
			"every knob overridden",
			map[string]string{"dirty_ratio": "30", "dirty_background_bytes": "1M", "min_free_kbytes": "0", "writeback_first": "false"},
			memcg.Knobs{DirtyRatio: 30, DirtyBackgroundBytes: 1 << 20},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := Load("", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.set != nil {
				if err := o.Set("/a", tt.set); err != nil {
					t.Fatal(err)
				}
			}
			if got := o.Apply("/a", configured); got != tt.want {
				t.Errorf("Apply(/a) = %+v, want %+v", got, tt.want)
			}
			if got := o.Apply("/a/child", configured); got != configured {
				t.Errorf("Apply(/a/child) = %+v: overrides are not inherited, want %+v", got, configured)
			}
		})
	}
}

func TestOverridesDeleteAndReset(t *testing.T) {
	path := filepath.Join(t.TempDir(), "overrides.json")
	o, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, cg := range []host.Cgroup{"/a", "/b", "/c"} {
		if err := o.Set(cg, map[string]string{"dirty_ratio": "15"}); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name string
		do   func() error
		want []host.Cgroup
	}{
		{"delete one", func() error { return o.Delete("/b") }, []host.Cgroup{"/a", "/c"}},
		{"delete one without overrides", func() error { return o.Delete("/x") }, []host.Cgroup{"/a", "/c"}},
		{"reset", o.Reset, nil},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		again, err := Load(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range [][]host.Cgroup{o.Cgroups(), again.Cgroups()} {
			if fmt.Sprint(got) != fmt.Sprint(s.want) {
				t.Errorf("%s: Cgroups() = %v, want %v", s.name, got, s.want)
			}
		}
	}
}

func TestOverridesFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "var", "lib", "memcgd")
	path := filepath.Join(dir, "overrides.json")
	o, err := Load(path, nil)
	if err != nil {
		t.Fatalf("missing file: %v, want no overrides", err)
	}
	if len(o.Cgroups()) != 0 {
		t.Fatalf("missing file gave %v", o.Cgroups())
	}
	if err := o.Set("/a", map[string]string{"dirty_bytes": "16M"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{dir, os.ModeDir | 0o700}, {path, 0o600}} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != c.mode {
			t.Errorf("%s mode %v, want %v", c.path, fi.Mode(), c.mode)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only overrides.json: a temporary file was left", len(entries))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "version": 1,
  "cgroups": {
    "/a": {
      "dirty_bytes": "16777216"
    }
  }
}
`
	if string(b) != want {
		t.Errorf("file:\n%s\nwant:\n%s", b, want)
	}
}

func TestOverridesPersistFailureKeepsState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "overrides.json")
	o, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Set("/a", map[string]string{"dirty_ratio": "15"}); err != nil {
		t.Fatal(err)
	}
	// A non-empty directory where the file was: rename onto it fails.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(path, "blocker"), 0o700); err != nil {
		t.Fatal(err)
	}
	ops := []struct {
		name string
		do   func() error
	}{
		{"set", func() error { return o.Set("/a", map[string]string{"dirty_bytes": "16M"}) }},
		{"set another cgroup", func() error { return o.Set("/b", map[string]string{"dirty_bytes": "16M"}) }},
		{"delete", func() error { return o.Delete("/a") }},
		{"reset", o.Reset},
	}
	for _, op := range ops {
		err := op.do()
		if err == nil || !strings.Contains(err.Error(), "save overrides") {
			t.Errorf("%s: err = %v, want a save overrides error", op.name, err)
		}
		if got, want := o.Get("/a"), map[string]string{"dirty_ratio": "15"}; !maps.Equal(got, want) {
			t.Errorf("%s: Get(/a) = %v after a failed write, want the previous %v", op.name, got, want)
		}
		if got := o.Get("/b"); len(got) != 0 {
			t.Errorf("%s: Get(/b) = %v after a failed write, want none", op.name, got)
		}
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries after failed writes, want the blocker only", len(entries))
	}
}

func TestLoadOverridesCorrupt(t *testing.T) {
	tests := []struct {
		name   string
		file   string
		errHas []string // beside the file name
	}{
		{"truncated", "{\n  \"version\": 1,\n  \"cgroups\": {\n    \"/a\": {", []string{"line 4, column 12", "unexpected end of JSON input"}},
		{"syntax", "{\"version\": 1,,}", []string{"line 1, column 15", "invalid character ','"}},
		{"not an object", "[]", []string{"line 1, column 1", "want an object, got a list"}},
		{"unknown key", "{\"version\": 1, \"knobs\": {}}", []string{"line 1, column 16", `unknown key "knobs"`}},
		{"no version", "{\"cgroups\": {}}", []string{"version: missing"}},
		{"future version", "{\"version\": 2}", []string{"line 1, column 13", "version: invalid value 2: allowed 1"}},
		{"number as knob value", "{\"version\": 1, \"cgroups\": {\"/a\": {\"dirty_ratio\": 15}}}", []string{"line 1, column 50", "want a string, got number 15"}},
		{
			"knob out of range",
			"{\n \"version\": 1,\n \"cgroups\": {\n  \"/a\": {\n   \"dirty_ratio\": \"150\"\n  }\n }\n}\n",
			[]string{"line 5, column 4", "cgroup /a: dirty_ratio", `"150"`, "0 to 100"},
		},
		{
			"both halves of a pair",
			"{\"version\": 1, \"cgroups\": {\"/a\": {\"dirty_ratio\": \"15\", \"dirty_bytes\": \"16777216\"}}}",
			[]string{"line 1, column 56", "only one of dirty_ratio and dirty_bytes"},
		},
		{"bad cgroup", "{\"version\": 1, \"cgroups\": {\"a\": {}}}", []string{"line 1, column 28", `cgroup: invalid value "a"`}},
		{"cgroup twice", "{\"version\": 1, \"cgroups\": {\"/a\": {}, \"/a\": {}}}", []string{"line 1, column 38", `key "/a" given twice`}},
		{"trailing data", "{\"version\": 1} {}", []string{"data after the closing brace"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "overrides.json")
			if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path, nil)
			checkErr(t, err, append([]string{path}, tt.errHas...))
		})
	}
}

func TestOverridesConcurrent(t *testing.T) {
	o, err := Load(filepath.Join(t.TempDir(), "overrides.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	const writers = 8
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			cg := host.Cgroup(fmt.Sprintf("/c%d", i))
			for r := 1; r <= 10; r++ {
				if err := o.Set(cg, map[string]string{"dirty_ratio": fmt.Sprint(r)}); err != nil {
					t.Error(err)
				}
				o.Apply(cg, memcg.DefaultKnobs())
				o.Get(cg)
			}
		})
	}
	wg.Wait()
	again, err := Load(o.Path(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range writers {
		cg := host.Cgroup(fmt.Sprintf("/c%d", i))
		if got := again.Get(cg)["dirty_ratio"]; got != "10" {
			t.Errorf("%s dirty_ratio = %q on disk, want the last write 10", cg, got)
		}
	}
}

// checkErr fails unless err is nil and errHas empty, or err mentions every
// string of errHas.
func checkErr(t *testing.T, err error, errHas []string) {
	t.Helper()
	if len(errHas) == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error, want one mentioning %q", errHas)
	}
	for _, s := range errHas {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}
