package cgroupfs

import (
	"os"
	"path/filepath"
	"testing"
)

func TestOpenForWritingReadsTheAccessMode(t *testing.T) {
	tests := []struct {
		fdinfo string
		want   bool
	}{
		{"pos:\t0\nflags:\t0100000\nmnt_id:\t25\nino:\t12\n", false}, // O_RDONLY|O_LARGEFILE
		{"pos:\t0\nflags:\t0100001\nmnt_id:\t25\nino:\t12\n", true},  // O_WRONLY
		{"pos:\t0\nflags:\t02102002\nmnt_id:\t25\nino:\t12\n", true}, // O_RDWR|O_APPEND|O_CLOEXEC
		{"pos:\t0\nflags:\t0100003\nmnt_id:\t25\nino:\t12\n", false}, // O_ACCMODE 3: no read or write (O_PATH-like)
		{"pos:\t0\nmnt_id:\t25\n", false},                            // no flags line
		{"pos:\t0\nflags:\tzz\n", false},                             // not octal
	}
	dir := t.TempDir()
	for i, tt := range tests {
		p := filepath.Join(dir, "fdinfo"+string(rune('a'+i)))
		if err := os.WriteFile(p, []byte(tt.fdinfo), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := openForWriting(p); got != tt.want {
			t.Errorf("openForWriting(%q) = %v, want %v", tt.fdinfo, got, tt.want)
		}
	}
	if openForWriting(filepath.Join(dir, "gone")) {
		t.Errorf("openForWriting of a vanished fd = true, want false")
	}
}
