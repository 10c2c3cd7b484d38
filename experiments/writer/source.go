package main

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/experiments/internal/lab"
)

// source is what dd reads from: /dev/zero, or the read end of a pipe that
// a feeder thread fills. A freezer's fake signal (kernel/cgroup/freezer.c,
// signal_wake_up) makes both return what they have so far:
// read_iter_zero() in drivers/char/mem.c checks signal_pending() between
// pages, and pipe_read() returns what it has read once the pipe is empty.
type source struct {
	fd int
	// feeder is the pipe's feeder, nil for /dev/zero.
	feeder *feeder
}

// openSource opens the source named from: "zero" or "pipe". A pipe's
// feeder writes size bytes in writes of chunk bytes; its buffer is set to
// chunk bytes (F_SETPIPE_SZ, rounded up by the kernel to a power of two
// pages; root may exceed fs.pipe-max-size) so that a read can find a whole
// chunk in it.
func openSource(from string, chunk, size uint64) (*source, error) {
	if from == "zero" {
		fd, err := unix.Open("/dev/zero", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("open /dev/zero: %w", err)
		}
		return &source{fd: fd}, nil
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, int(chunk)); err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return nil, fmt.Errorf("pipe: set its size to %d: %w", chunk, err)
	}
	f := &feeder{fd: p[1], chunk: chunk, size: size, done: make(chan struct{})}
	go f.run()
	return &source{fd: p[0], feeder: f}, nil
}

// read reads into buf once, counting a read that returned less than
// asked, and when (since start) for the first few; a read that failed with EINTR is counted and retried. The end of
// the input is an error: the writer never asks for more than the source
// holds.
func (s *source) read(buf []byte, r *lab.WriterResult, start time.Time) (uint64, error) {
	for {
		n, err := unix.Read(s.fd, buf)
		if errors.Is(err, unix.EINTR) {
			r.EINTR++
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("read: %w", err)
		}
		if n == 0 {
			return 0, fmt.Errorf("read: end of input with %d bytes asked", len(buf))
		}
		r.Reads++
		if n < len(buf) {
			r.ShortReads++
			if len(r.ShortReadsAt) < lab.MaxShortReadsAt {
				r.ShortReadsAt = append(r.ShortReadsAt, time.Since(start).Seconds())
			}
		}
		return uint64(n), nil
	}
}

// close closes the source and, for a pipe, waits for its feeder and
// returns how many of its writes were short.
func (s *source) close() (feederShort uint64, err error) {
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
	if s.feeder == nil {
		return 0, nil
	}
	<-s.feeder.done
	return s.feeder.short, s.feeder.err
}

// writeAll writes buf to fd, counting each write(2) and each that wrote
// less than asked; it writes the rest with the next. A write that failed
// with EINTR is counted and retried.
func writeAll(fd int, buf []byte, r *lab.WriterResult) error {
	for len(buf) > 0 {
		n, err := unix.Write(fd, buf)
		if errors.Is(err, unix.EINTR) {
			r.EINTR++
			continue
		}
		if err != nil {
			return err
		}
		r.Writes++
		if n < len(buf) {
			r.ShortWrites++
		}
		buf = buf[n:]
	}
	return nil
}

// feeder fills a pipe with size bytes of zeros in writes of chunk bytes,
// on a thread of its own: another task of the writer's cgroup, as `cat` is
// in `cat /dev/zero | dd`. pipe_write() in fs/pipe.c returns what it wrote
// so far when a signal is pending, so a freeze can make its writes short.
type feeder struct {
	fd          int
	chunk, size uint64
	// short and err are set before done is closed.
	short uint64
	err   error
	done  chan struct{}
}

func (f *feeder) run() {
	defer close(f.done)
	defer unix.Close(f.fd)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	buf := make([]byte, f.chunk)
	for sent := uint64(0); sent < f.size; {
		want := min(f.chunk, f.size-sent)
		n, err := unix.Write(f.fd, buf[:want])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EPIPE) {
			return // the reader is gone: it ended (with an error of its own)
		}
		if err != nil {
			f.err = fmt.Errorf("feed the pipe: %w", err)
			return
		}
		if uint64(n) < want {
			f.short++
		}
		sent += uint64(n)
	}
}
