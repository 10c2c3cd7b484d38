// Package pollfd waits for kernel descriptors (an epoll set, a BPF ring
// buffer) on the Go runtime's network poller instead of in a blocking
// system call.
//
// A goroutine blocked in a system call such as epoll_wait keeps its P
// (GOMAXPROCS) until the runtime's sysmon takes it back
// (runtime/proc.go, retake), and sysmon, after a quiet spell, looks only
// every 10 ms. memcgd had three such waiters (the tracker's two rings and
// the Watcher's loop); a goroutine made runnable meanwhile waited for
// sysmon while the remaining Ps were busy: 4 to 14 ms in an execution
// trace of the daemon under the unpaced writer test (docs/lab/2026-11-30-closedloop.md).
// The poller parks a waiting goroutine without a P, and sysmon has no P
// to take back.
package pollfd

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNotPollable says the runtime's poller does not take the descriptor
// (epoll refused it): the caller must block as before.
var ErrNotPollable = errors.New("descriptor cannot join the runtime's poller")

// A File is a duplicate of a descriptor on the runtime's poller. Closing
// it wakes its waiter and leaves the original open.
type File struct {
	f      *os.File
	rc     syscall.RawConn
	closed atomic.Bool
}

// Open duplicates fd, makes the duplicate non-blocking and puts it on the
// runtime's poller. fd must poll readable when what its owner waits for
// is ready, and wake its pollers when it becomes so (an epoll set, a BPF
// ring buffer map); the original fd is left as it is.
func Open(fd int, name string) (*File, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("pollfd %s: dup: %w", name, err)
	}
	if err := unix.SetNonblock(dup, true); err != nil {
		unix.Close(dup)
		return nil, fmt.Errorf("pollfd %s: non-blocking: %w", name, err)
	}
	// os.NewFile puts a non-blocking descriptor on the poller if epoll
	// takes it; a deadline is refused (os.ErrNoDeadline) if it did not.
	f := os.NewFile(uintptr(dup), name)
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		f.Close()
		return nil, fmt.Errorf("pollfd %s: %w (%w)", name, ErrNotPollable, err)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("pollfd %s: %w", name, err)
	}
	return &File{f: f, rc: rc}, nil
}

// Wait calls ready until it returns true, parking between calls until
// the descriptor polls readable, or until deadline (zero: none), when it
// returns os.ErrDeadlineExceeded. ready must not block; it should consume
// what it finds (an epoll_wait with timeout 0, a non-blocking read), since
// the poller reports edges: a readiness left unconsumed is not reported
// again. A readiness that comes after ready returned false and before
// the goroutine parks is not lost. After Close, Wait returns an error
// wrapping os.ErrClosed.
func (p *File) Wait(ready func() bool, deadline time.Time) error {
	err := p.f.SetReadDeadline(deadline)
	if err == nil {
		err = p.rc.Read(func(uintptr) bool { return ready() })
	}
	if err != nil && p.closed.Load() {
		// The poller says "use of closed file" (internal/poll's
		// ErrFileClosing), which os.ErrClosed does not match.
		return fmt.Errorf("pollfd %s: %w", p.f.Name(), os.ErrClosed)
	}
	return err
}

// Close closes the duplicate, waking a Wait in progress.
func (p *File) Close() error {
	p.closed.Store(true)
	return p.f.Close()
}
