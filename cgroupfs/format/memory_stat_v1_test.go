package format

import (
	"reflect"
	"strings"
	"testing"

	"github.com/memcgd/memcgd/memcg"
)

// v1Fields maps each memory.stat key to the field ParseMemoryStatV1 fills.
func v1Fields(s *MemoryStatV1) map[string]*uint64 {
	m := map[string]*uint64{"hierarchical_memory_limit": &s.HierarchicalMemoryLimit}
	for prefix, c := range map[string]*MemoryStatV1Counts{"": &s.Local, "total_": &s.Total} {
		for k, p := range map[string]*uint64{
			"cache": &c.Cache, "rss": &c.RSS, "shmem": &c.Shmem, "mapped_file": &c.MappedFile,
			"dirty": &c.Dirty, "writeback": &c.Writeback, "swap": &c.Swap,
			"workingset_refault_file": &c.WorkingsetRefaultFile,
			"pgpgin":                  &c.Pgpgin, "pgpgout": &c.Pgpgout, "pgfault": &c.Pgfault, "pgmajfault": &c.Pgmajfault,
			"inactive_anon": &c.InactiveAnon, "active_anon": &c.ActiveAnon,
			"inactive_file": &c.InactiveFile, "active_file": &c.ActiveFile, "unevictable": &c.Unevictable,
		} {
			m[prefix+k] = p
		}
	}
	return m
}

func TestV1FieldsCoverTheStruct(t *testing.T) {
	var s MemoryStatV1
	n := 1 + 2*reflect.TypeOf(s.Local).NumField()
	if got := len(v1Fields(&s)); got != n {
		t.Errorf("v1Fields maps %d keys, MemoryStatV1 has %d fields", got, n)
	}
}

// checkV1AgainstReference compares every field with the reference parser.
func checkV1AgainstReference(t *testing.T, b []byte, s *MemoryStatV1) {
	t.Helper()
	fields := v1Fields(s)
	ref, err := refKeyed(b, func(k string) bool { return fields[k] != nil })
	if err != nil {
		t.Fatalf("reference parser rejects input the parser took: %v", err)
	}
	if v, ok := ref["hierarchical_memory_limit"]; ok && v >= v1Unlimited {
		ref["hierarchical_memory_limit"] = memcg.NoLimit
	}
	for k, p := range fields {
		if *p != ref[k] {
			t.Errorf("%s = %d, reference parser says %d", k, *p, ref[k])
		}
	}
}

func TestParseMemoryStatV1(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		want    map[string]uint64 // keys of memory.stat
		wantErr string
	}{{
		name: "32 MiB written under a 64M limit without fsync is dirty page cache",
		in:   fixture(t, "v1/memory.stat"),
		want: map[string]uint64{"cache": 32 << 20, "dirty": 32 << 20, "total_dirty": 32 << 20,
			"writeback": 0, "hierarchical_memory_limit": 64 << 20},
	}, {
		name: "96 MiB through a 64M limit: reclaim waited for writeback, nothing dirty left",
		in:   fixture(t, "v1/memory.stat.reclaimed"),
		want: map[string]uint64{"total_dirty": 0, "total_writeback": 0, "hierarchical_memory_limit": 64 << 20},
	}, {
		name: "an unlimited hierarchy reads as NoLimit",
		in:   []byte("cache 1\nhierarchical_memory_limit 9223372036854771712\n"),
		want: map[string]uint64{"cache": 1, "hierarchical_memory_limit": memcg.NoLimit},
	}, {
		name: "local and total figures are kept apart",
		in:   []byte("dirty 4096\ntotal_dirty 12288\n"),
		want: map[string]uint64{"dirty": 4096, "total_dirty": 12288},
	}, {
		name: "unknown keys are ignored, whatever their value",
		in:   []byte("cache 1\nfuture_key -1\nrecent_rotated_anon 5\ntotal_future x\nrss 2"),
		want: map[string]uint64{"cache": 1, "rss": 2},
	}, {
		name: "the largest uint64 is a value",
		in:   []byte("pgfault 18446744073709551615\n"),
		want: map[string]uint64{"pgfault": 18446744073709551615},
	}, {
		name: "an empty file is all zeros",
		in:   nil,
		want: map[string]uint64{"cache": 0},
	}, {
		name:    "a line without a value names the line",
		in:      []byte("cache 1\nrss\n"),
		wantErr: `memory.stat line 2 "rss": want "key value"`,
	}, {
		name:    "a negative value of a known key",
		in:      []byte("cache -1\n"),
		wantErr: `memory.stat line 1 "cache -1": want "key value" with a decimal value`,
	}, {
		name:    "a value past uint64",
		in:      []byte("cache 18446744073709551616\n"),
		wantErr: `line 1 "cache 18446744073709551616"`,
	}, {
		name:    "a blank line",
		in:      []byte("cache 1\n\nrss 2\n"),
		wantErr: "line 2",
	}, {
		name:    "two spaces",
		in:      []byte("cache  1\n"),
		wantErr: "line 1",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := MemoryStatV1{Local: MemoryStatV1Counts{Cache: 99}} // must be reset
			err := ParseMemoryStatV1(tt.in, &s)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			fields := v1Fields(&s)
			for k, want := range tt.want {
				if got := *fields[k]; got != want {
					t.Errorf("%s = %d, want %d", k, got, want)
				}
			}
			checkV1AgainstReference(t, tt.in, &s)
		})
	}
}

func TestParseMemoryStatV1AllocatesNothing(t *testing.T) {
	b := fixture(t, "v1/memory.stat")
	var s MemoryStatV1
	if n := testing.AllocsPerRun(100, func() { _ = ParseMemoryStatV1(b, &s) }); n != 0 {
		t.Errorf("%v allocations per parse, want 0", n)
	}
}

func FuzzParseMemoryStatV1(f *testing.F) {
	addFixtures(f, "v1/memory.stat*")
	f.Add([]byte("total_dirty 1\nhierarchical_memory_limit 9223372036854775807"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s MemoryStatV1
		err := ParseMemoryStatV1(b, &s)
		fields := v1Fields(&s)
		_, refErr := refKeyed(b, func(k string) bool { return fields[k] != nil })
		if (err == nil) != (refErr == nil) {
			t.Fatalf("parser error %v, reference error %v", err, refErr)
		}
		if err == nil {
			checkV1AgainstReference(t, b, &s)
		}
	})
}

func BenchmarkParseMemoryStatV1(b *testing.B) {
	in := fixture(b, "v1/memory.stat")
	var s MemoryStatV1
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if err := ParseMemoryStatV1(in, &s); err != nil {
			b.Fatal(err)
		}
	}
}
