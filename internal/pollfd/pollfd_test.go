package pollfd

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// eventfd returns a non-blocking eventfd, closed at the end of the test.
func eventfd(t *testing.T) int {
	t.Helper()
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func signal(t *testing.T, fd int) {
	t.Helper()
	one := [8]byte{1}
	if _, err := unix.Write(fd, one[:]); err != nil {
		t.Error(err)
	}
}

// consume reads fd's counter: true if it was set.
func consume(fd int) bool {
	var b [8]byte
	n, _ := unix.Read(fd, b[:])
	return n == 8
}

// epollOf returns an epoll set holding fd, closed at the end of the test.
func epollOf(t *testing.T, fd int) int {
	t.Helper()
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(ep) })
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
		t.Fatal(err)
	}
	return ep
}

// awaitParked waits, up to 5 s, until a goroutine is parked on the
// runtime's poller inside Wait: its stack, as runtime.Stack prints it, is
// in state "IO wait" with File.Wait among its frames. It is how a test
// knows that a wake-up it then causes comes to a parked Wait, without
// sleeping and hoping.
func awaitParked() error {
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(5 * time.Second); ; {
		n := runtime.Stack(buf, true)
		for g := range strings.SplitSeq(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "[IO wait") && strings.Contains(g, "pollfd.(*File).Wait") {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return errors.New("no goroutine parked in Wait within 5 s")
		}
		runtime.Gosched()
	}
}

// Wait returns once what it waits for is signalled, whether the signal
// comes while it is parked, before it first looks, or between a look that
// found nothing and the park; and it waits on an epoll set as on the
// descriptor itself.
func TestWaitReturnsOnReadiness(t *testing.T) {
	for _, tc := range []struct {
		name  string
		epoll bool // wait on an epoll set holding the eventfd
		// when: "later" from another goroutine once Wait is parked,
		// "before" Wait, "race" inside the first look after it found
		// nothing.
		when string
	}{
		{"eventfd, signalled later", false, "later"},
		{"eventfd, signalled before", false, "before"},
		{"eventfd, signalled between the look and the park", false, "race"},
		{"epoll set, signalled later", true, "later"},
		{"epoll set, signalled between the look and the park", true, "race"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			efd := eventfd(t)
			fd := efd
			ready := func() bool { return consume(efd) }
			if tc.epoll {
				fd = epollOf(t, efd)
				events := make([]unix.EpollEvent, 4)
				ready = func() bool {
					n, _ := unix.EpollWait(fd, events, 0)
					return n > 0 && consume(efd)
				}
			}
			p, err := Open(fd, tc.name)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			look := ready
			switch tc.when {
			case "later":
				go func() {
					if err := awaitParked(); err != nil {
						t.Error(err)
					}
					signal(t, efd)
				}()
			case "before":
				signal(t, efd)
			case "race":
				first := true
				look = func() bool {
					if first {
						first = false
						ok := ready()
						signal(t, efd)
						return ok
					}
					return ready()
				}
			}
			start := time.Now()
			if err := p.Wait(look, time.Now().Add(5*time.Second)); err != nil {
				t.Fatalf("Wait: %v after %v, want nil: the signal was lost", err, time.Since(start))
			}
		})
	}
}

func TestWaitEndsAtTheDeadline(t *testing.T) {
	p, err := Open(eventfd(t), "eventfd")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	start := time.Now()
	err = p.Wait(func() bool { return false }, start.Add(30*time.Millisecond))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Wait = %v, want os.ErrDeadlineExceeded", err)
	}
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Fatalf("Wait returned after %v, before its 30ms deadline", took)
	}
}

// Close wakes a Wait in progress, and leaves the original descriptor
// open.
func TestCloseWakesWaitAndKeepsTheOriginal(t *testing.T) {
	fd := eventfd(t)
	p, err := Open(fd, "eventfd")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Wait(func() bool { return false }, time.Time{}) }()
	if err := awaitParked(); err != nil {
		t.Fatal(err)
	}
	p.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("Wait after Close = %v, want an error wrapping os.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return within 5s of Close")
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
		t.Errorf("the original descriptor after Close: %v, want it open", err)
	}
}

// A regular file cannot join epoll: Open says so, and the caller blocks
// as before.
func TestOpenRefusesWhatEpollRefuses(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "regular"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if p, err := Open(int(f.Fd()), "regular"); !errors.Is(err, ErrNotPollable) {
		if p != nil {
			p.Close()
		}
		t.Fatalf("Open(regular file) = %v, want ErrNotPollable", err)
	}
}
