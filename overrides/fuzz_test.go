package overrides

import (
	"maps"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad: any file either loads or is refused with an error; what loads
// survives a write and a reload unchanged.
func FuzzLoad(f *testing.F) {
	for _, s := range []string{
		`{"version": 1, "cgroups": {"/a": {"dirty_bytes": "16777216"}}}`,
		`{"version": 1, "cgroups": {"/a": {"dirty_ratio": "15"}}, "ids": {"/a": 12}}`,
		`{"version": 1, "cgroups": {"/a": {"dirty_ratio": "15", "dirty_bytes": "1"}}}`,
		"{\"version\": 1,,}",
		`[1, 2]`,
		`&a {"version": 1}`,
		"version: 1\ncgroups: {/a: {min_free_kbytes: auto}}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "overrides.json")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		o, err := Load(path, nil)
		if err != nil {
			return
		}
		copyPath := filepath.Join(dir, "copy.json")
		c, _ := Load(copyPath, nil)
		for _, cg := range o.Cgroups() {
			if !cg.Valid() {
				continue // Set refuses these; see TestSetRefusesNonUTF8
			}
			if err := c.Set(cg, o.Get(cg)); err != nil {
				t.Fatalf("%s: loaded knobs %v refused by Set: %v", cg, o.Get(cg), err)
			}
		}
		back, err := Load(copyPath, nil)
		if err != nil {
			t.Fatalf("reload of a written file: %v", err)
		}
		if len(back.Cgroups()) == 0 && len(c.Cgroups()) != 0 {
			t.Fatalf("written %v, read back nothing", c.Cgroups())
		}
		for _, cg := range back.Cgroups() {
			if !maps.Equal(back.Get(cg), o.Get(cg)) {
				t.Fatalf("%s: %v after a round trip, want %v", cg, back.Get(cg), o.Get(cg))
			}
		}
	})
}
