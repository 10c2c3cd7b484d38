package dirtytrack

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// record builds a ring-buffer record as bpf/dirtytrack.c lays it out.
func record(kind Kind, level uint32, id, second, ktime uint64, path string) []byte {
	small := kind == Wake || kind == NewDirtier || kind == LevelCrossed
	size := wakeEventSize
	if !small {
		size = cgroupEventSize
	}
	b := make([]byte, size)
	le := binary.LittleEndian
	le.PutUint32(b[0:], uint32(kind))
	le.PutUint32(b[4:], level)
	le.PutUint64(b[8:], id)
	le.PutUint64(b[16:], second)
	le.PutUint64(b[24:], ktime)
	if !small {
		copy(b[32:], path)
	}
	return b
}

func TestDecodeEvent(t *testing.T) {
	long := "/" + strings.Repeat("x", 300)
	tests := []struct {
		name    string
		in      []byte
		want    Event
		wantErr string
	}{
		{"wake", record(Wake, 0, 42, 8<<20, 1500, ""),
			Event{Kind: Wake, ID: 42, Dirtied: 8 << 20, Time: 1500 * time.Nanosecond}, ""},
		{"new dirtier", record(NewDirtier, 4242, 42, 0, 1500, ""),
			Event{Kind: NewDirtier, ID: 42, TID: 4242, Time: 1500 * time.Nanosecond}, ""},
		{"level crossed, downwards", record(LevelCrossed, 0, 42, uint64(1<<64-(3<<20)), 1500, ""),
			Event{Kind: LevelCrossed, ID: 42, DirtyLevel: -3 << 20, Time: 1500 * time.Nanosecond}, ""},
		{"mkdir", record(Mkdir, 2, 7, 5, 99, "/a/b"),
			Event{Kind: Mkdir, ID: 7, Parent: 5, Level: 2, Time: 99, Path: "/a/b"}, ""},
		{"rmdir", record(Rmdir, 1, 9, 1, 3, "/c"),
			Event{Kind: Rmdir, ID: 9, Parent: 1, Level: 1, Time: 3, Path: "/c"}, ""},
		{"path filling the record has no NUL", record(Mkdir, 1, 1, 1, 1, long),
			Event{Kind: Mkdir, ID: 1, Parent: 1, Level: 1, Time: 1, Path: long[:256]}, ""},
		{"short record", make([]byte, 8), Event{}, "8 bytes, want at least 32"},
		{"truncated mkdir", func() []byte { b := record(Mkdir, 1, 1, 1, 1, "/x"); return b[:100] }(), Event{}, "mkdir event: 100 bytes, want 288"},
		{"unknown type", record(Kind(9), 0, 0, 0, 0, ""), Event{}, "type 9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeEvent(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("decodeEvent: err %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("decodeEvent: %v", err)
			}
			if got != tt.want {
				t.Errorf("decodeEvent = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func FuzzDecodeEvent(f *testing.F) {
	f.Add(record(Wake, 0, 42, 8<<20, 1500, ""))
	f.Add(record(Mkdir, 2, 7, 5, 99, "/a/b"))
	f.Add(record(NewDirtier, 4242, 42, 0, 1500, ""))
	f.Add(record(LevelCrossed, 0, 42, 1<<20, 1500, ""))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := decodeEvent(b)
		if err != nil {
			return
		}
		if ev.Kind != Wake && ev.Kind != Mkdir && ev.Kind != Rmdir && ev.Kind != NewDirtier && ev.Kind != LevelCrossed {
			t.Fatalf("decoded kind %v", ev.Kind)
		}
		if len(ev.Path) > 256 || strings.IndexByte(ev.Path, 0) >= 0 {
			t.Fatalf("decoded path %q", ev.Path)
		}
	})
}

func TestOptionsDefaultsAndErrors(t *testing.T) {
	tests := []struct {
		name    string
		in      Options
		wantErr string
	}{
		{"zero value", Options{}, ""},
		{"ring not a power of two", Options{RingBytes: 3 << 12}, "RingBytes 12288: want a power of two"},
		{"ring below a page", Options{RingBytes: 1024}, "RingBytes 1024"},
		{"wake ring not a power of two", Options{WakeRingBytes: 5 << 12}, "WakeRingBytes 20480: want a power of two"},
		{"negative event buffer", Options{EventBuffer: -1}, "EventBuffer -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.withDefaults()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("withDefaults: err %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.MaxWatched == 0 || got.MaxMemcgs == 0 || got.MaxInodes == 0 || got.RingBytes == 0 || got.WakeRingBytes == 0 || got.EventBuffer == 0 || got.Logger == nil {
				t.Errorf("withDefaults left a zero: %+v", got)
			}
		})
	}
}

func TestFileHandleAndDev(t *testing.T) {
	// ext4 and xfs with 32-bit inode numbers: FILEID_INO32_GEN {ino, gen}.
	h := fileHandle(Inode{Ino: 0x01020304, Generation: 0xa0b0c0d0})
	if h.Type() != 1 || string(h.Bytes()) != "\x04\x03\x02\x01\xd0\xc0\xb0\xa0" {
		t.Errorf("32-bit handle: type %#x bytes % x", h.Type(), h.Bytes())
	}
	// xfs with 64-bit inode numbers: type 0x81 {u64 ino, u32 gen}.
	h = fileHandle(Inode{Ino: 1 << 40, Generation: 7})
	if h.Type() != 0x81 || h.Size() != 12 || binary.LittleEndian.Uint64(h.Bytes()) != 1<<40 || binary.LittleEndian.Uint32(h.Bytes()[8:]) != 7 {
		t.Errorf("64-bit handle: type %#x bytes % x", h.Type(), h.Bytes())
	}
	// The kernel's dev_t is MAJOR << 20 | MINOR (include/linux/kdev_t.h).
	if got, want := kernelDev(254<<20|3), unix.Mkdev(254, 3); got != want {
		t.Errorf("kernelDev(254:3) = %#x, want %#x", got, want)
	}
	if got, want := kernelDev(259<<20|0x12345), unix.Mkdev(259, 0x12345); got != want {
		t.Errorf("kernelDev(259:0x12345) = %#x, want %#x", got, want)
	}
}
