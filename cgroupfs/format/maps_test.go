package format

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// refMaps is the reference parser of /proc/PID/maps: strings.Fields and
// strconv.
func refMaps(b []byte) ([]Mapping, error) {
	var out []Mapping
	for i, line := range lines(b) {
		// The first five fields are separated by single spaces.
		f := strings.SplitN(line, " ", 6)
		if len(f) < 5 || f[4] == "" {
			return nil, fmt.Errorf("line %d: fields", i+1)
		}
		if len(f) == 6 {
			f = f[:5]
		}
		start, end, ok1 := strings.Cut(f[0], "-")
		major, minor, ok2 := strings.Cut(f[3], ":")
		if !ok1 || !ok2 || len(f[1]) != 4 {
			return nil, fmt.Errorf("line %d: shape", i+1)
		}
		var m Mapping
		var errs [6]error
		var ma, mi uint64
		m.Start, errs[0] = hex(start, 64)
		m.End, errs[1] = hex(end, 64)
		m.Offset, errs[2] = hex(f[2], 64)
		ma, errs[3] = hex(major, 32)
		mi, errs[4] = hex(minor, 32)
		m.Inode, errs[5] = dec(f[4])
		for _, err := range errs {
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", i+1, err)
			}
		}
		m.Major, m.Minor = uint32(ma), uint32(mi)
		p := f[1]
		if !strings.ContainsRune("r-", rune(p[0])) || !strings.ContainsRune("w-", rune(p[1])) ||
			!strings.ContainsRune("x-", rune(p[2])) || !strings.ContainsRune("sp", rune(p[3])) {
			return nil, fmt.Errorf("line %d: perms %q", i+1, p)
		}
		m.Read, m.Write, m.Exec, m.Shared = p[0] == 'r', p[1] == 'w', p[2] == 'x', p[3] == 's'
		out = append(out, m)
	}
	return out, nil
}

func hex(s string, bits int) (uint64, error) {
	if s == "" || strings.ContainsAny(s, "ABCDEF+-xX_") {
		return 0, fmt.Errorf("hex %q", s)
	}
	return strconv.ParseUint(s, 16, bits)
}

func dec(s string) (uint64, error) {
	if s == "" || strings.ContainsAny(s, "+-_") {
		return 0, fmt.Errorf("decimal %q", s)
	}
	return strconv.ParseUint(s, 10, 64)
}

func TestParseMaps(t *testing.T) {
	var got []Mapping
	if err := ParseMaps(fixture(t, "proc/maps"), func(m Mapping) { got = append(got, m) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 111 {
		t.Errorf("%d mappings, want the fixture's 111 lines", len(got))
	}
	// The fixture's shared writable mapping of a 1 MiB ext4 file (line 7).
	want := Mapping{Start: 0x7fdb5eed1000, End: 0x7fdb5efd1000, Read: true, Write: true, Shared: true,
		Major: 0xfe, Minor: 0, Inode: 794626}
	if got[6] != want {
		t.Errorf("line 7: got %+v, want %+v", got[6], want)
	}
	tests := []struct {
		name, in string
		want     Mapping
		wantErr  string
	}{
		{"a non-PIE binary below 4 GiB: addresses padded to 8 digits",
			"00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/dbus-daemon\n",
			Mapping{Start: 0x400000, End: 0x452000, Read: true, Exec: true, Major: 8, Minor: 2, Inode: 173521}, ""},
		{"anonymous: no path, inode 0", "7ffd1000-7ffd2000 rw-p 00000000 00:00 0 \n",
			Mapping{Start: 0x7ffd1000, End: 0x7ffd2000, Read: true, Write: true}, ""},
		{"a path with spaces and (deleted)", "1000-2000 rw-s 00001000 fd:01 12 /tmp/a b (deleted)\n",
			Mapping{Start: 0x1000, End: 0x2000, Read: true, Write: true, Shared: true, Offset: 0x1000, Major: 0xfd, Minor: 1, Inode: 12}, ""},
		{"bad perms", "1000-2000 rwzs 00000000 fd:01 12\n", Mapping{}, `maps line 1 "1000-2000 rwzs`},
		{"no inode", "1000-2000 rw-s 00000000 fd:01\n", Mapping{}, `maps line 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ms []Mapping
			err := ParseMaps([]byte(tt.in), func(m Mapping) { ms = append(ms, m) })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(ms) != 1 || ms[0] != tt.want {
				t.Errorf("got %+v, %v; want %+v", ms, err, tt.want)
			}
		})
	}
}

func TestParseMapsAllocatesNothing(t *testing.T) {
	b := fixture(t, "proc/maps")
	n := 0
	fn := func(Mapping) { n++ }
	if a := testing.AllocsPerRun(100, func() { _ = ParseMaps(b, fn) }); a != 0 {
		t.Errorf("%v allocations per parse, want 0", a)
	}
}

func FuzzParseMaps(f *testing.F) {
	addFixtures(f, "proc/maps")
	f.Fuzz(func(t *testing.T, b []byte) {
		var got []Mapping
		err := ParseMaps(b, func(m Mapping) { got = append(got, m) })
		ref, refErr := refMaps(b)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("parser error %v, reference error %v", err, refErr)
		}
		if err != nil {
			return
		}
		if len(got) != len(ref) {
			t.Fatalf("%d mappings, reference parser says %d", len(got), len(ref))
		}
		for i := range got {
			if got[i] != ref[i] {
				t.Errorf("mapping %d: %+v, reference parser says %+v", i, got[i], ref[i])
			}
		}
	})
}
