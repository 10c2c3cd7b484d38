package act

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestForWritingReadsTheAccessMode(t *testing.T) {
	tests := []struct {
		flags uint64
		want  bool
	}{
		{0100000, false}, // O_RDONLY|O_LARGEFILE
		{0100001, true},  // O_WRONLY
		{02102002, true}, // O_RDWR|O_APPEND|O_CLOEXEC
		{0100003, false}, // O_ACCMODE 3: no read or write
		{unix.O_PATH | unix.O_CLOEXEC, false},
	}
	for _, tt := range tests {
		if got := forWriting(tt.flags); got != tt.want {
			t.Errorf("forWriting(%#o) = %v, want %v", tt.flags, got, tt.want)
		}
	}
}
