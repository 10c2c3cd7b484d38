package format

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// refLocks is the reference parser of /proc/locks: strings.Fields and
// strconv.
func refLocks(b []byte) ([]Lock, error) {
	var out []Lock
	for i, line := range lines(b) {
		f := strings.Fields(line)
		var l Lock
		if len(f) > 1 && f[1] == "->" {
			l.Blocked = true
			f = append(f[:1], f[2:]...)
		}
		if len(f) != 8 || !strings.HasSuffix(f[0], ":") {
			return nil, fmt.Errorf("line %d: fields", i+1)
		}
		var err error
		if l.ID, err = dec(strings.TrimSuffix(f[0], ":")); err != nil {
			return nil, fmt.Errorf("line %d: %v", i+1, err)
		}
		l.Class = f[1]
		switch f[3] {
		case "WRITE":
			l.Write = true
		case "READ", "UNLCK":
		default:
			return nil, fmt.Errorf("line %d: type %q", i+1, f[3])
		}
		if l.PID, err = strconv.Atoi(f[4]); err != nil {
			return nil, fmt.Errorf("line %d: %v", i+1, err)
		}
		if f[5] != "<none>:0" {
			dev := strings.Split(f[5], ":")
			if len(dev) != 3 {
				return nil, fmt.Errorf("line %d: file %q", i+1, f[5])
			}
			ma, err1 := hex(dev[0], 32)
			mi, err2 := hex(dev[1], 32)
			ino, err3 := dec(dev[2])
			if err1 != nil || err2 != nil || err3 != nil {
				return nil, fmt.Errorf("line %d: file %q", i+1, f[5])
			}
			l.Major, l.Minor, l.Inode, l.HasInode = uint32(ma), uint32(mi), ino, true
		}
		out = append(out, l)
	}
	return out, nil
}

func TestParseLocks(t *testing.T) {
	var got []Lock
	if err := ParseLocks(fixture(t, "proc/locks"), func(l Lock) { got = append(got, l) }); err != nil {
		t.Fatal(err)
	}
	want := []Lock{
		{ID: 1, Class: "FLOCK", PID: 14607, Major: 0xfe, Inode: 9984385, HasInode: true},
		{ID: 2, Class: "OFDLCK", PID: -1, Major: 0xfe, Inode: 9984370, HasInode: true},
		{ID: 3, Class: "POSIX", Write: true, PID: 14607, Major: 0xfe, Inode: 9984369, HasInode: true},
		{ID: 4, Class: "FLOCK", Write: true, PID: 14607, Major: 0xfe, Inode: 9984354, HasInode: true},
		{ID: 5, Class: "FLOCK", Write: true, PID: 12965, Major: 0xfe, Inode: 5310748, HasInode: true},
		{ID: 5, Blocked: true, Class: "FLOCK", Write: true, PID: 13533, Major: 0xfe, Inode: 5310748, HasInode: true},
		{ID: 5, Blocked: true, Class: "FLOCK", Write: true, PID: 14566, Major: 0xfe, Inode: 5310748, HasInode: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
}

func TestParseLocksRefusesOtherShapes(t *testing.T) {
	for _, in := range []string{
		"1: FLOCK  ADVISORY  WRITE 12965 fe:00:5310748 0\n",       // a field short
		"1 FLOCK  ADVISORY  WRITE 12965 fe:00:5310748 0 EOF\n",    // no colon after the id
		"1: FLOCK  ADVISORY  LOCKED 12965 fe:00:5310748 0 EOF\n",  // an unknown type
		"1: FLOCK  ADVISORY  WRITE x fe:00:5310748 0 EOF\n",       // no pid
		"1: FLOCK  ADVISORY  WRITE 12965 FE:00:5310748 0 EOF\n",   // uppercase hexadecimal
		"1: FLOCK  ADVISORY  WRITE 12965 fe:00 0 EOF\n",           // no inode
		"1: FLOCK  ADVISORY  WRITE 12965 100000000:00:1 0 EOF\n",  // a major past 32 bits
		"1: -> -> FLOCK  ADVISORY  WRITE 1 fe:00:5310748 0 EOF\n", // two arrows
	} {
		if err := ParseLocks([]byte(in), func(Lock) {}); err == nil {
			t.Errorf("ParseLocks(%q): no error", in)
		}
		if _, err := refLocks([]byte(in)); err == nil {
			t.Errorf("refLocks(%q): no error; the reference disagrees with the table", in)
		}
	}
	var got Lock
	if err := ParseLocks([]byte("7: LEASE  ACTIVE    READ 3 <none>:0 0 EOF\n"), func(l Lock) { got = l }); err != nil {
		t.Fatal(err)
	}
	if want := (Lock{ID: 7, Class: "LEASE", PID: 3}); got != want {
		t.Errorf("a lock without an inode: got %+v, want %+v", got, want)
	}
}

func FuzzParseLocks(f *testing.F) {
	f.Add(fixture(f, "proc/locks"))
	f.Add([]byte("1: FLOCK  ADVISORY  WRITE 1 <none>:0 0 EOF\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var got []Lock
		err := ParseLocks(b, func(l Lock) { got = append(got, l) })
		want, refErr := refLocks(b)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("ParseLocks error %v, reference %v", err, refErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("ParseLocks %+v, reference %+v", got, want)
		}
	})
}
