package cgroupfs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// issue 9, defect 4: a file operation that never returns (here the open
// of a FIFO without a writer, which blocks as a hung FUSE or NFS open
// does) costs the caller at most the timeout; later operations on the
// same filesystem are refused at once while it is stuck, and no more than
// MaxStuck operations can be stuck. When the kernel call returns, its
// filesystem is usable again.
func TestBoundedIOAbandonsAHungOpen(t *testing.T) {
	const timeout = 200 * time.Millisecond
	b, err := NewBoundedIO(IOOptions{Timeout: timeout, MaxStuck: 2})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fifo := func(name string) string {
		p := filepath.Join(dir, name)
		if err := unix.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hang := func(p string) func() {
		return func() {
			if fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
				unix.Close(fd)
			}
		}
	}
	ctx := context.Background()
	a, c := fifo("a"), fifo("c")
	keyA, keyB, keyC := ioKey{'m', 1}, ioKey{'m', 2}, ioKey{'m', 3}

	start := time.Now()
	err = b.do(ctx, keyA, hang(a))
	took := time.Since(start)
	t.Logf("hung open: %v after %v", err, took.Round(time.Millisecond))
	if !errors.Is(err, ErrStuck) {
		t.Fatalf("hung open: error %v, want ErrStuck", err)
	}
	if took > timeout+2*time.Second {
		t.Errorf("hung open returned after %v, want about %v", took, timeout)
	}

	ran := false
	start = time.Now()
	err = b.do(ctx, keyA, func() { ran = true })
	if !errors.Is(err, ErrStuck) || ran || time.Since(start) > timeout/2 {
		t.Errorf("next operation on the stuck filesystem: error %v, ran %v after %v; want ErrStuck at once, not run", err, ran, time.Since(start))
	}
	if err := b.do(ctx, keyB, func() { ran = true }); err != nil || !ran {
		t.Errorf("operation on another filesystem: error %v, ran %v; want it run", err, ran)
	}
	if err := b.do(ctx, keyC, hang(c)); !errors.Is(err, ErrStuck) {
		t.Fatalf("second hung open: error %v, want ErrStuck", err)
	}
	if got := b.Stuck(); got != 2 {
		t.Errorf("Stuck() = %d, want 2", got)
	}
	ran = false
	if err := b.do(ctx, keyB, func() { ran = true }); !errors.Is(err, ErrStuck) || ran {
		t.Errorf("with MaxStuck operations stuck: error %v, ran %v; want ErrStuck, not run", err, ran)
	}

	// A writer unblocks both opens; their filesystems come back.
	for _, p := range []string{a, c} {
		fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
	}
	for deadline := time.Now().Add(5 * time.Second); b.Stuck() > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Stuck() = %d 5s after the opens returned, want 0", b.Stuck())
		}
	}
	if err := b.do(ctx, keyA, func() {}); err != nil {
		t.Errorf("after the hung open returned: %v, want the filesystem usable", err)
	}
}

// A cancelled context abandons the wait at once: shutdown never waits for
// a hung filesystem.
func TestBoundedIOStopsWaitingWhenCancelled(t *testing.T) {
	b, err := NewBoundedIO(IOOptions{Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	err = b.do(ctx, ioKey{'m', 1}, func() { <-release })
	if !errors.Is(err, ErrStuck) || !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Errorf("cancelled after 50ms: error %v after %v; want ErrStuck and context.Canceled promptly", err, time.Since(start))
	}
}

func TestIOOptionsRefuseBadValues(t *testing.T) {
	for _, o := range []IOOptions{{Timeout: -1}, {MaxStuck: -1}} {
		if _, err := NewBoundedIO(o); err == nil {
			t.Errorf("NewBoundedIO(%+v): no error", o)
		}
	}
	for _, o := range []FlushOptions{{Interval: -1}, {MaxInFlight: -1}} {
		if _, err := o.withDefaults(); err == nil {
			t.Errorf("FlushOptions %+v: no error", o)
		}
	}
}

// WriteOutFD owns the descriptor it is given: it is closed whether the
// write-out ran or was refused because its filesystem is stuck.
func TestWriteOutFDClosesItsDescriptorWhenRefused(t *testing.T) {
	b, err := NewBoundedIO(IOOptions{Timeout: 50 * time.Millisecond, MaxStuck: 1})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer close(release)
	if err := b.do(context.Background(), ioKey{'d', 7}, func() { <-release }); !errors.Is(err, ErrStuck) {
		t.Fatalf("blocking operation: %v, want ErrStuck", err)
	}
	fd, err := unix.Open(t.TempDir(), unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = b.WriteOutFD(context.Background(), "/proc", fd, FileID{}, NewMounts("/proc"), 7)
	if !errors.Is(err, ErrStuck) {
		t.Errorf("WriteOutFD on a stuck filesystem: %v, want ErrStuck", err)
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
	b, err := NewBoundedIO(IOOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mounts := NewMounts("/proc")
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
		want    FileID
		wantErr error
	}{
		{"the regular file", file, FileID{Dev: st.Dev, Ino: st.Ino}, nil},
		{"the regular file, listed as another inode", file, FileID{Ino: st.Ino + 1}, errUnsafeFile},
		{"a FIFO", fifo, FileID{}, errUnsafeFile},
	} {
		fd, err := unix.Open(tt.path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		err = b.WriteOutFD(context.Background(), "/proc", fd, tt.want, mounts, st.Dev)
		if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
			t.Errorf("%s: WriteOutFD = %v, want %v", tt.name, err, tt.wantErr)
		}
	}
}
