package format

import (
	"reflect"
	"strings"
	"testing"
)

// v2Fields maps each memory.stat key to the field ParseMemoryStatV2 fills.
func v2Fields(s *MemoryStatV2) map[string]*uint64 {
	return map[string]*uint64{
		"anon": &s.Anon, "file": &s.File, "file_mapped": &s.FileMapped, "file_dirty": &s.FileDirty,
		"file_writeback": &s.FileWriteback, "shmem": &s.Shmem,
		"inactive_anon": &s.InactiveAnon, "active_anon": &s.ActiveAnon,
		"inactive_file": &s.InactiveFile, "active_file": &s.ActiveFile, "unevictable": &s.Unevictable,
		"workingset_refault_file": &s.WorkingsetRefaultFile,
		"pgscan":                  &s.Pgscan, "pgsteal": &s.Pgsteal,
		"pgscan_kswapd": &s.PgscanKswapd, "pgscan_direct": &s.PgscanDirect,
		"pgsteal_kswapd": &s.PgstealKswapd, "pgsteal_direct": &s.PgstealDirect,
		"pgrefill": &s.Pgrefill, "pgfault": &s.Pgfault, "pgmajfault": &s.Pgmajfault,
	}
}

var v2ReclaimKeys = []string{"pgscan_kswapd", "pgscan_direct", "pgsteal_kswapd", "pgsteal_direct"}

func TestV2FieldsCoverTheStruct(t *testing.T) {
	var s MemoryStatV2
	n := reflect.TypeOf(s).NumField() - 1 // all but HasReclaim
	if got := len(v2Fields(&s)); got != n {
		t.Errorf("v2Fields maps %d keys, MemoryStatV2 has %d counters", got, n)
	}
}

func checkV2AgainstReference(t *testing.T, b []byte, s *MemoryStatV2) {
	t.Helper()
	fields := v2Fields(s)
	ref, err := refKeyed(b, func(k string) bool { return fields[k] != nil })
	if err != nil {
		t.Fatalf("reference parser rejects input the parser took: %v", err)
	}
	for k, p := range fields {
		if *p != ref[k] {
			t.Errorf("%s = %d, reference parser says %d", k, *p, ref[k])
		}
	}
	has := false
	for _, k := range v2ReclaimKeys {
		_, ok := ref[k]
		has = has || ok
	}
	if s.HasReclaim != has {
		t.Errorf("HasReclaim = %v, want %v", s.HasReclaim, has)
	}
}

func TestParseMemoryStatV2(t *testing.T) {
	tests := []struct {
		name       string
		in         []byte
		want       map[string]uint64
		hasReclaim bool
		wantErr    string
	}{{
		name: "Debian 6.1: 128 MiB through a 64M limit, reclaimed in direct reclaim, some still dirty",
		in:   fixture(t, "v2/memory.stat"),
		want: map[string]uint64{"file": 63488000, "file_dirty": 8744960, "file_writeback": 0,
			"pgscan_direct": 17270, "pgsteal_direct": 17270, "pgscan_kswapd": 0},
		hasReclaim: true,
	}, {
		name:       "a kernel without the split reclaim counters says so",
		in:         []byte("anon 4096\nfile 8192\npgscan 10\npgsteal 9\n"),
		want:       map[string]uint64{"anon": 4096, "file": 8192, "pgscan": 10, "pgsteal": 9},
		hasReclaim: false,
	}, {
		name:       "unknown keys are ignored",
		in:         []byte("zswap_incomp 1\npgscan_proactive x\nfile_dirty 4096\npgsteal_kswapd 3"),
		want:       map[string]uint64{"file_dirty": 4096, "pgsteal_kswapd": 3},
		hasReclaim: true,
	}, {
		name:    "a value that is not a number names the line",
		in:      []byte("anon 1\nfile 1\nfile_dirty 12k\n"),
		wantErr: `memory.stat line 3 "file_dirty 12k": want "key value" with a decimal value`,
	}, {
		name:    "a line that is only a key",
		in:      []byte("anon\n"),
		wantErr: `memory.stat line 1 "anon": want "key value"`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := MemoryStatV2{FileDirty: 99, HasReclaim: true} // must be reset
			err := ParseMemoryStatV2(tt.in, &s)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			fields := v2Fields(&s)
			for k, want := range tt.want {
				if got := *fields[k]; got != want {
					t.Errorf("%s = %d, want %d", k, got, want)
				}
			}
			if s.HasReclaim != tt.hasReclaim {
				t.Errorf("HasReclaim = %v, want %v", s.HasReclaim, tt.hasReclaim)
			}
			checkV2AgainstReference(t, tt.in, &s)
		})
	}
}

func TestParseMemoryStatV2AllocatesNothing(t *testing.T) {
	b := fixture(t, "v2/memory.stat")
	var s MemoryStatV2
	if n := testing.AllocsPerRun(100, func() { _ = ParseMemoryStatV2(b, &s) }); n != 0 {
		t.Errorf("%v allocations per parse, want 0", n)
	}
}

func FuzzParseMemoryStatV2(f *testing.F) {
	addFixtures(f, "v2/memory.stat")
	f.Add([]byte("pgscan_direct 1\nfile_dirty 0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s MemoryStatV2
		err := ParseMemoryStatV2(b, &s)
		fields := v2Fields(&s)
		_, refErr := refKeyed(b, func(k string) bool { return fields[k] != nil })
		if (err == nil) != (refErr == nil) {
			t.Fatalf("parser error %v, reference error %v", err, refErr)
		}
		if err == nil {
			checkV2AgainstReference(t, b, &s)
		}
	})
}

func BenchmarkParseMemoryStatV2(b *testing.B) {
	in := fixture(b, "v2/memory.stat")
	var s MemoryStatV2
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if err := ParseMemoryStatV2(in, &s); err != nil {
			b.Fatal(err)
		}
	}
}
