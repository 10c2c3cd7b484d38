package format

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// refColonKeyed is the reference parser of "key: value" files: each line
// split at its first colon, values trimmed of blanks. known keys must
// carry a number in base, with suffix removed; other lines are skipped
// when lax, else they must still be "key: something".
func refColonKeyed(b []byte, known map[string]bool, base int, suffix string, lax bool) (map[string]uint64, error) {
	m := map[string]uint64{}
	for i, line := range lines(b) {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			if lax {
				continue
			}
			return nil, fmt.Errorf("line %d %q: not key: value", i+1, line)
		}
		if !known[k] {
			continue
		}
		v = strings.TrimLeft(v, " \t")
		if suffix != "" {
			var ok bool
			if v, ok = strings.CutSuffix(v, suffix); !ok {
				return nil, fmt.Errorf("line %d: no %q", i+1, suffix)
			}
		}
		if v == "" || v[0] == '+' || v[0] == '-' {
			return nil, fmt.Errorf("line %d: no number", i+1)
		}
		n, err := strconv.ParseUint(v, base, 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", i+1, err)
		}
		if suffix == " kB" {
			if n > (1<<64-1)>>10 {
				return nil, fmt.Errorf("line %d: overflow", i+1)
			}
			n <<= 10
		}
		m[k] = n
	}
	return m, nil
}

func TestParseFDInfo(t *testing.T) {
	tests := []parseCase[FDInfo]{{
		name: "6.18: a file open O_WRONLY|O_APPEND|O_CLOEXEC|O_LARGEFILE on ext4",
		in:   fixture(t, "proc/fdinfo.wronly"),
		want: FDInfo{Pos: 1 << 20, Flags: 02102001, MntID: 27, Ino: 794626, HasIno: true},
	}, {
		name: "6.18: O_RDWR",
		in:   fixture(t, "proc/fdinfo.rdwr"),
		want: FDInfo{Flags: 02100002, MntID: 27, Ino: 794626, HasIno: true},
	}, {
		name: "6.18: an O_PATH descriptor: O_PATH|O_CLOEXEC, access mode 0",
		in:   fixture(t, "proc/fdinfo.opath"),
		want: FDInfo{Flags: 012000000, MntID: 27, Ino: 246947, HasIno: true},
	}, {
		name: "a kernel before 5.10 prints no ino; an eventfd's own lines are skipped",
		in:   []byte("pos:\t0\nflags:\t02004002\nmnt_id:\t15\neventfd-count:                0\neventfd-id: 3\n"),
		want: FDInfo{Flags: 02004002, MntID: 15},
	}, {
		name:    "flags are octal",
		in:      []byte("pos:\t0\nflags:\t0100009\nmnt_id:\t25\n"),
		wantErr: `fdinfo line 2 "flags:\t0100009"`,
	}, {
		name:    "mnt_id is required",
		in:      []byte("pos:\t0\nflags:\t0100000\n"),
		wantErr: "want pos, flags and mnt_id lines",
	}}
	runParseCases(t, tests, FDInfo{MntID: 99}, ParseFDInfo)
}

func TestParseTaskIO(t *testing.T) {
	tests := []parseCase[TaskIO]{{
		name: "6.18: a process that wrote 1 MiB and truncated a page",
		in:   fixture(t, "proc/io"),
		want: TaskIO{RChar: 1702379, WChar: 1065982, SyscR: 1230, SyscW: 34, ReadBytes: 241664,
			WriteBytes: 1110016, CancelledWriteBytes: 4096},
	}, {
		name:    "no write_bytes without CONFIG_TASK_IO_ACCOUNTING",
		in:      []byte("rchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\n"),
		wantErr: "no write_bytes line",
	}, {
		name:    "a bad value names the line",
		in:      []byte("rchar: 1\nwrite_bytes: -1\n"),
		wantErr: `io line 2 "write_bytes: -1"`,
	}}
	runParseCases(t, tests, TaskIO{RChar: 99}, ParseTaskIO)
}

func TestParseMemInfo(t *testing.T) {
	tests := []parseCase[MemInfo]{{
		name: "6.18, 24 GiB host",
		in:   fixture(t, "proc/meminfo"),
		want: MemInfo{Total: 24684092 << 10, Free: 24006248 << 10, Available: 24329972 << 10},
	}, {
		name:    "MemFree is required",
		in:      []byte("MemTotal:       1024 kB\n"),
		wantErr: "want MemTotal and MemFree",
	}, {
		name:    "a value without its unit names the line",
		in:      []byte("MemTotal:       1024 kB\nMemFree:  12\n"),
		wantErr: `meminfo line 2 "MemFree:  12"`,
	}, {
		name:    "a value past 2^64 bytes",
		in:      []byte("MemTotal:       18014398509481984 kB\nMemFree: 1 kB\n"),
		wantErr: `meminfo line 1`,
	}}
	runParseCases(t, tests, MemInfo{Total: 99}, ParseMemInfo)
}

func TestProcParsersAllocateNothing(t *testing.T) {
	fd, io, mi := fixture(t, "proc/fdinfo.wronly"), fixture(t, "proc/io"), fixture(t, "proc/meminfo")
	var (
		f FDInfo
		i TaskIO
		m MemInfo
	)
	for name, parse := range map[string]func(){
		"fdinfo":  func() { _ = ParseFDInfo(fd, &f) },
		"io":      func() { _ = ParseTaskIO(io, &i) },
		"meminfo": func() { _ = ParseMemInfo(mi, &m) },
	} {
		if n := testing.AllocsPerRun(100, parse); n != 0 {
			t.Errorf("%s: %v allocations per parse, want 0", name, n)
		}
	}
}

func FuzzParseFDInfo(f *testing.F) {
	addFixtures(f, "proc/fdinfo.*")
	f.Fuzz(func(t *testing.T, b []byte) {
		var fi FDInfo
		err := ParseFDInfo(b, &fi)
		ref, refErr := refColonKeyed(b, map[string]bool{"pos": true, "mnt_id": true, "ino": true}, 10, "", true)
		flags, flagsErr := refColonKeyed(b, map[string]bool{"flags": true}, 8, "", true)
		_, hasPos := ref["pos"]
		_, hasMnt := ref["mnt_id"]
		_, hasFlags := flags["flags"]
		refOK := refErr == nil && flagsErr == nil && hasPos && hasMnt && hasFlags
		if (err == nil) != refOK {
			t.Fatalf("parser error %v, reference errors %v %v (pos %v mnt_id %v flags %v)", err, refErr, flagsErr, hasPos, hasMnt, hasFlags)
		}
		if err != nil {
			return
		}
		_, hasIno := ref["ino"]
		want := FDInfo{Pos: ref["pos"], Flags: flags["flags"], MntID: ref["mnt_id"], Ino: ref["ino"], HasIno: hasIno}
		if fi != want {
			t.Errorf("got %+v, reference parser says %+v", fi, want)
		}
	})
}

func FuzzParseTaskIO(f *testing.F) {
	addFixtures(f, "proc/io")
	f.Fuzz(func(t *testing.T, b []byte) {
		var io TaskIO
		err := ParseTaskIO(b, &io)
		fields := map[string]*uint64{"rchar": &io.RChar, "wchar": &io.WChar, "syscr": &io.SyscR, "syscw": &io.SyscW,
			"read_bytes": &io.ReadBytes, "write_bytes": &io.WriteBytes, "cancelled_write_bytes": &io.CancelledWriteBytes}
		known := map[string]bool{}
		for k := range fields {
			known[k] = true
		}
		ref, refErr := refColonKeyed(b, known, 10, "", false)
		_, hasWB := ref["write_bytes"]
		if (err == nil) != (refErr == nil && hasWB) {
			t.Fatalf("parser error %v, reference error %v (write_bytes %v)", err, refErr, hasWB)
		}
		if err != nil {
			return
		}
		for k, p := range fields {
			if *p != ref[k] {
				t.Errorf("%s = %d, reference parser says %d", k, *p, ref[k])
			}
		}
	})
}

func FuzzParseMemInfo(f *testing.F) {
	addFixtures(f, "proc/meminfo")
	f.Fuzz(func(t *testing.T, b []byte) {
		var m MemInfo
		err := ParseMemInfo(b, &m)
		ref, refErr := refColonKeyed(b, map[string]bool{"MemTotal": true, "MemFree": true, "MemAvailable": true}, 10, " kB", false)
		_, hasTotal := ref["MemTotal"]
		_, hasFree := ref["MemFree"]
		if (err == nil) != (refErr == nil && hasTotal && hasFree) {
			t.Fatalf("parser error %v, reference error %v (MemTotal %v MemFree %v)", err, refErr, hasTotal, hasFree)
		}
		if err != nil {
			return
		}
		if want := (MemInfo{Total: ref["MemTotal"], Free: ref["MemFree"], Available: ref["MemAvailable"]}); m != want {
			t.Errorf("got %+v, reference parser says %+v", m, want)
		}
	})
}
