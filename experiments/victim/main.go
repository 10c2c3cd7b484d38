// Command victim is a workload that runs beside a noisy one and measures
// what the noisy one (or a throttle acting on it) does to it. It runs one
// loop on a thread of its own, prints "ready TID" (that thread's id, for
// reading its kernel stack), runs until its standard input ends, then
// prints one JSON line (lab.VictimResult).
//
//	victim -mode sleep [-interval 1ms]                 # wake-up lateness
//	victim -mode sync -file F [-block 4K]              # write+fdatasync latency, a database's log
//	victim -mode write -file F [-chunk 1M] -rate 32M   # a paced buffered writer's write(2)s
//
// In sleep mode each loop is one clock_nanosleep(CLOCK_MONOTONIC) of
// -interval, and its latency how much later than asked it returned. In
// sync mode each loop writes -block bytes at the end of the file and
// fdatasyncs it; its latency is the pair's. In write mode each loop
// write(2)s -chunk bytes at the end of the file, paced to -rate by a token
// bucket that holds one chunk (lab.Bucket), and its latency is the
// write(2)'s: a writer that balance_dirty_pages() throttles shows it
// there. The report also has the loop thread's scheduler statistics: its
// time waiting for a CPU tells a CPU shortage from a wait in the kernel.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/experiments/internal/lab"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "victim:", err)
		os.Exit(1)
	}
}

// config is the flags.
type config struct {
	mode, file   string
	interval     time.Duration
	block, chunk lab.Size
	rate         lab.Size
	slow         time.Duration
}

func run() error {
	c := config{block: 4 << 10, chunk: 1 << 20}
	flag.StringVar(&c.mode, "mode", "", "sleep, sync or write (required)")
	flag.StringVar(&c.file, "file", "", "file to create and write (sync, write)")
	flag.DurationVar(&c.interval, "interval", time.Millisecond, "sleep: the sleep asked")
	flag.Var(&c.block, "block", "sync: bytes written before each fdatasync")
	flag.Var(&c.chunk, "chunk", "write: bytes per write(2)")
	flag.Var(&c.rate, "rate", "write: bytes per second; 0 is unpaced")
	flag.DurationVar(&c.slow, "slow", 10*time.Millisecond, "a loop slower than this counts as slow")
	flag.Parse()
	l, err := newLoop(c)
	if err != nil {
		return err
	}
	// The loop runs on a thread of its own, locked to it, so that its
	// schedstat and its kernel stack are the loop's alone.
	var stop atomic.Bool
	type started struct {
		tid int
		err error
	}
	ready := make(chan started)
	done := make(chan lab.VictimResult)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		res, err := l.run(&stop, func(err error) { ready <- started{unix.Gettid(), err} })
		if err != nil {
			errc <- err
			return
		}
		done <- res
	}()
	s := <-ready
	if s.err != nil {
		return s.err
	}
	fmt.Printf("ready %d\n", s.tid)
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		return fmt.Errorf("read standard input: %w", err)
	}
	stop.Store(true)
	select {
	case err := <-errc:
		return err
	case res := <-done:
		res.Mode = c.mode
		return json.NewEncoder(os.Stdout).Encode(res)
	}
}

// loop is one mode's loop, prepared.
type loop struct {
	c   config
	fd  int    // the file (sync, write), -1 for sleep
	buf []byte // what a loop writes (sync, write)
}

func newLoop(c config) (*loop, error) {
	l := &loop{c: c, fd: -1}
	switch c.mode {
	case lab.VictimSleep:
		if c.interval <= 0 {
			return nil, fmt.Errorf("-interval: invalid value %v: want a positive duration", c.interval)
		}
		return l, nil
	case lab.VictimSync, lab.VictimWrite:
	default:
		return nil, fmt.Errorf("-mode: invalid value %q: want %s, %s or %s", c.mode, lab.VictimSleep, lab.VictimSync, lab.VictimWrite)
	}
	if c.file == "" {
		return nil, fmt.Errorf("-file: missing: mode %s writes a file", c.mode)
	}
	if c.mode == lab.VictimSync && c.block == 0 || c.mode == lab.VictimWrite && c.chunk == 0 {
		return nil, fmt.Errorf("-block, -chunk: invalid value 0: want at least one byte")
	}
	fd, err := unix.Open(c.file, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", c.file, err)
	}
	l.fd = fd
	l.buf = make([]byte, c.block)
	if c.mode == lab.VictimWrite {
		l.buf = make([]byte, c.chunk)
	}
	return l, nil
}

// run runs the loop on the calling thread until stop, calling started once
// it is ready (with an error if it cannot start).
func (l *loop) run(stop *atomic.Bool, started func(error)) (lab.VictimResult, error) {
	var res lab.VictimResult
	sched0, err := lab.ReadSchedStat("/proc/thread-self/schedstat")
	if err != nil {
		started(err)
		return res, err
	}
	started(nil)
	var lat lab.Series
	t0 := time.Now()
	var step func() (time.Duration, error)
	switch l.c.mode {
	case lab.VictimSleep:
		step = l.sleep
	case lab.VictimSync:
		step = func() (time.Duration, error) { return l.sync(&res) }
	default:
		b := lab.NewBucket(uint64(l.c.rate), uint64(l.c.chunk))
		step = func() (time.Duration, error) { return l.write(&res, b) }
	}
	for !stop.Load() {
		d, err := step()
		if err != nil {
			return res, err
		}
		lat = append(lat, uint64(d))
		if d > l.c.slow {
			res.Slow++
		}
	}
	res.Wall = time.Since(t0)
	sched1, err := lab.ReadSchedStat("/proc/thread-self/schedstat")
	if err != nil {
		return res, err
	}
	if l.fd >= 0 {
		if err := unix.Close(l.fd); err != nil {
			return res, fmt.Errorf("close %s: %w", l.c.file, err)
		}
	}
	res.Sched = sched1.Sub(sched0)
	res.Ops = uint64(len(lat))
	res.Latency = lab.LatenciesOf(lat)
	return res, nil
}

// sleep sleeps the interval and returns how late it woke.
func (l *loop) sleep() (time.Duration, error) {
	ts := unix.NsecToTimespec(l.c.interval.Nanoseconds())
	start := time.Now()
	// A signal (none is expected) cuts the sleep short: the loop then
	// counts an early wake-up, lateness 0, and goes on.
	if err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, 0, &ts, nil); err != nil && !errors.Is(err, unix.EINTR) {
		return 0, fmt.Errorf("clock_nanosleep: %w", err)
	}
	return max(time.Since(start)-l.c.interval, 0), nil
}

// sync writes a block at the end of the file and fdatasyncs it, and
// returns how long the pair took.
func (l *loop) sync(res *lab.VictimResult) (time.Duration, error) {
	buf := l.buf
	start := time.Now()
	if err := pwriteAll(l.fd, buf, int64(res.Bytes)); err != nil {
		return 0, fmt.Errorf("write %s: %w", l.c.file, err)
	}
	wrote := time.Now()
	if err := unix.Fdatasync(l.fd); err != nil {
		return 0, fmt.Errorf("fdatasync %s: %w", l.c.file, err)
	}
	end := time.Now()
	res.Bytes += uint64(len(buf))
	res.WriteTime += wrote.Sub(start)
	res.SyncTime += end.Sub(wrote)
	return end.Sub(start), nil
}

// write waits for the pace, writes a chunk at the end of the file and
// returns how long the write(2) took.
func (l *loop) write(res *lab.VictimResult, b *lab.Bucket) (time.Duration, error) {
	buf := l.buf
	b.Take(uint64(len(buf)))
	start := time.Now()
	if err := pwriteAll(l.fd, buf, int64(res.Bytes)); err != nil {
		return 0, fmt.Errorf("write %s: %w", l.c.file, err)
	}
	d := time.Since(start)
	res.Bytes += uint64(len(buf))
	res.WriteTime += d
	return d, nil
}

// pwriteAll writes buf at off, going on after a short write or EINTR.
func pwriteAll(fd int, buf []byte, off int64) error {
	for len(buf) > 0 {
		n, err := unix.Pwrite(fd, buf, off)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		buf, off = buf[n:], off+int64(n)
	}
	return nil
}
