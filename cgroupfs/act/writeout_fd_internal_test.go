package act

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/safeio"
	"golang.org/x/sys/unix"
)

// WriteOutFD owns the descriptor it is given: it is closed whether the
// write-out ran or was refused because its filesystem is stuck.
func TestWriteOutFDClosesItsDescriptorWhenRefused(t *testing.T) {
	b, err := safeio.NewBoundedIO(safeio.IOOptions{Timeout: 50 * time.Millisecond, MaxStuck: 1})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer close(release)
	if err := b.Do(context.Background(), safeio.DeviceKey(7), func() { <-release }); !errors.Is(err, safeio.ErrStuck) {
		t.Fatalf("blocking operation: %v, want safeio.ErrStuck", err)
	}
	fd, err := unix.Open(t.TempDir(), unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = WriteOutFD(context.Background(), b, "/proc", fd, safeio.FileID{}, safeio.NewMounts("/proc"), 7)
	if !errors.Is(err, safeio.ErrStuck) {
		t.Errorf("WriteOutFD on a stuck filesystem: %v, want safeio.ErrStuck", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
		t.Errorf("descriptor %d still open after a refused WriteOutFD (fcntl: %v)", fd, err)
	}
}

// WriteOutFD, the entry point of a second source of files, writes out a
// regular file on a safe filesystem and refuses anything else without
// opening it.
func TestWriteOutFDChecksTheDescriptor(t *testing.T) {
	dir := t.TempDir()
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil || sfs.Type == unix.TMPFS_MAGIC {
		t.Skipf("%s is on tmpfs (%v): set TMPDIR to a disk", dir, err)
	}
	file, fifo := filepath.Join(dir, "file"), filepath.Join(dir, "fifo")
	if err := os.WriteFile(file, make([]byte, 1<<16), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := safeio.NewBoundedIO(safeio.IOOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mounts := safeio.NewMounts("/proc")
	if err := mounts.Load(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(file, &st); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		path    string
		want    safeio.FileID
		wantErr error
	}{
		{"the regular file", file, safeio.FileID{Dev: st.Dev, Ino: st.Ino}, nil},
		{"the regular file, listed as another inode", file, safeio.FileID{Ino: st.Ino + 1}, safeio.ErrUnsafeFile},
		{"a FIFO", fifo, safeio.FileID{}, safeio.ErrUnsafeFile},
	} {
		fd, err := unix.Open(tt.path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		err = WriteOutFD(context.Background(), b, "/proc", fd, tt.want, mounts, st.Dev)
		if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
			t.Errorf("%s: WriteOutFD = %v, want %v", tt.name, err, tt.wantErr)
		}
	}
}
