package safeio

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"testing/synctest"
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
	keyA, keyB, keyC := Key{'m', 1}, Key{'m', 2}, Key{'m', 3}

	start := time.Now()
	err = b.Do(ctx, keyA, hang(a))
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
	err = b.Do(ctx, keyA, func() { ran = true })
	if !errors.Is(err, ErrStuck) || ran || time.Since(start) > timeout/2 {
		t.Errorf("next operation on the stuck filesystem: error %v, ran %v after %v; want ErrStuck at once, not run", err, ran, time.Since(start))
	}
	if err := b.Do(ctx, keyB, func() { ran = true }); err != nil || !ran {
		t.Errorf("operation on another filesystem: error %v, ran %v; want it run", err, ran)
	}
	if err := b.Do(ctx, keyC, hang(c)); !errors.Is(err, ErrStuck) {
		t.Fatalf("second hung open: error %v, want ErrStuck", err)
	}
	if got := b.Stuck(); got != 2 {
		t.Errorf("Stuck() = %d, want 2", got)
	}
	ran = false
	if err := b.Do(ctx, keyB, func() { ran = true }); !errors.Is(err, ErrStuck) || ran {
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
	if err := b.Do(ctx, keyA, func() {}); err != nil {
		t.Errorf("after the hung open returned: %v, want the filesystem usable", err)
	}
}

// A cancelled context abandons the wait at once: shutdown never waits for
// a hung filesystem. In a synctest bubble the clock moves only when every
// goroutine waits, so "at once" is exact: the 50 ms to the cancel.
func TestBoundedIOStopsWaitingWhenCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := NewBoundedIO(IOOptions{Timeout: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		defer close(release)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		err = b.Do(ctx, Key{'m', 1}, func() { <-release })
		if took := time.Since(start); !errors.Is(err, ErrStuck) || !errors.Is(err, context.Canceled) || took != 50*time.Millisecond {
			t.Errorf("cancelled after 50ms: error %v after %v; want ErrStuck and context.Canceled after 50ms", err, took)
		}
	})
}

// The bookkeeping of an abandoned operation, on fake time: Run gives up
// after exactly the timeout; while the operation is blocked its key, and
// with MaxStuck 1 every key, is refused at once without running; when it
// returns, abandon runs on its goroutine and the filesystem is usable
// again.
func TestBoundedIOAbandonsAndTakesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 200 * time.Millisecond
		b, err := NewBoundedIO(IOOptions{Timeout: timeout, MaxStuck: 1})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		keyA, keyB := Key{'m', 1}, Key{'m', 2}
		release := make(chan struct{})
		abandoned := 0
		start := time.Now()
		err = b.Run(ctx, keyA, func() { <-release }, func() { abandoned++ })
		if took := time.Since(start); !errors.Is(err, ErrStuck) || errors.Is(err, ErrRefused) || took != timeout {
			t.Fatalf("blocked operation: %v after %v, want ErrStuck (not refused) after %v", err, took, timeout)
		}
		if got := b.Stuck(); got != 1 {
			t.Errorf("Stuck() = %d, want 1", got)
		}
		for _, key := range []Key{keyA, keyB} {
			ran := false
			start = time.Now()
			err := b.Do(ctx, key, func() { ran = true })
			if !errors.Is(err, ErrRefused) || ran || time.Since(start) != 0 {
				t.Errorf("%v while one operation is stuck (MaxStuck 1): %v, ran %v after %v; want refused at once, not run",
					key, err, ran, time.Since(start))
			}
		}

		close(release)
		synctest.Wait() // the operation's goroutine has returned
		if abandoned != 1 || b.Stuck() != 0 {
			t.Errorf("after the blocked operation returned: abandon ran %d times (want 1), Stuck() = %d (want 0)", abandoned, b.Stuck())
		}
		ran := false
		if err := b.Do(ctx, keyA, func() { ran = true }); err != nil || !ran {
			t.Errorf("after the operation returned: %v, ran %v; want it run", err, ran)
		}
		if abandoned != 1 {
			t.Errorf("abandon ran %d times, want 1: only for the abandoned operation", abandoned)
		}
	})
}

func TestIOOptionsRefuseBadValues(t *testing.T) {
	for _, o := range []IOOptions{{Timeout: -1}, {MaxStuck: -1}} {
		if _, err := NewBoundedIO(o); err == nil {
			t.Errorf("NewBoundedIO(%+v): no error", o)
		}
	}
}
