// Command writer is the experiments' dd: it writes a new file sequentially
// in fixed-size chunks through the page cache, unpaced or paced by a token
// bucket, and prints what it did as one JSON line (lab.WriterResult).
//
//	writer -file /var/tmp/f -size 2G -chunk 1M -rate 100M [-fsync]
//
// -rate is in bytes per second with memparse suffixes (100M is 100 MiB/s);
// 0 writes as fast as the kernel lets it. The bucket (lab.Bucket) holds
// one chunk, so a writer held up (by reclaim, by a throttle) does not
// burst afterwards to catch up: it writes at most -rate from then on, as a
// paced producer would.
//
// With -from it is dd: each chunk is read(2) from a source, /dev/zero
// (zero) or a pipe that a thread of its own fills with zeros in chunk-sized
// write(2)s (pipe, as `cat /dev/zero | dd`), and what the read returned is
// write(2)n, as dd without iflag=fullblock does. A read that returns less
// than asked is a short read, a write that writes less than asked a short
// write (the rest is written by the next call); both are counted, as are
// calls that failed with EINTR, and the feeder's own short writes into the
// pipe. The writer stops when -size bytes are written, so the file is
// complete whatever the reads returned. Without -from it writes a buffer
// of zeros and reads nothing.
//
//	writer -file /var/tmp/f -size 1G -from zero
//
// With -stdin it writes on demand instead, for measuring reactions to a
// write: it prints "ready", then for each decimal byte count N read from
// standard input, one per line, takes CLOCK_MONOTONIC, write(2)s N new
// bytes in one call and prints the time it took before the call, in
// nanoseconds, one per line. It ends at the end of its input.
//
//	writer -file /var/tmp/f -stdin
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/experiments/internal/lab"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "writer:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		file  = flag.String("file", "", "file to create and write (required)")
		size  = lab.Size(2 << 30)
		chunk = lab.Size(1 << 20)
		rate  lab.Size
		// budget makes the writer pace itself as an ideal throttle would.
		budget lab.Size
		sync   = flag.Bool("fsync", false, "fsync the file after writing it, timed separately")
		from   = flag.String("from", "", "read each chunk from a source first, as dd: zero (/dev/zero) or pipe (a pipe fed by a thread of the writer); empty reads nothing")
		stdin  = flag.Bool("stdin", false, "write on demand: a byte count per line of standard input, printing when each write(2) began")
	)
	flag.Var(&size, "size", "bytes to write")
	flag.Var(&chunk, "chunk", "bytes per write(2)")
	flag.Var(&rate, "rate", "bytes per second; 0 is unpaced")
	flag.Var(&budget, "budget", "self-paced: keep at most this many bytes of the file dirty or under writeback, by starting the write-out of every write at once and waiting for the oldest (0: no limit)")
	flag.Parse()
	if *file == "" {
		return fmt.Errorf("-file: missing: want the path of a file to create")
	}
	if chunk == 0 {
		return fmt.Errorf("-chunk: invalid value 0: want at least one byte")
	}
	if *from != "" && *from != "zero" && *from != "pipe" {
		return fmt.Errorf("-from: invalid value %q: want zero, pipe or nothing", *from)
	}
	f, err := os.OpenFile(*file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if *stdin {
		if err := onDemand(f, os.Stdin, os.Stdout); err != nil {
			return err
		}
		return f.Close()
	}
	buf := make([]byte, chunk)

	start := time.Now()
	b := lab.NewBucket(uint64(rate), uint64(chunk))
	p := pacer{fd: int(f.Fd()), budget: uint64(budget), chunk: uint64(chunk)}
	var src *source
	if *from != "" {
		if src, err = openSource(*from, uint64(chunk), uint64(size)); err != nil {
			return err
		}
		defer src.close()
	}
	var res lab.WriterResult
	var written uint64
	for written < uint64(size) {
		n := min(uint64(chunk), uint64(size)-written)
		b.Take(n)
		if src == nil {
			if _, err := f.Write(buf[:n]); err != nil {
				return fmt.Errorf("write %s at %d: %w", *file, written, err)
			}
		} else {
			if n, err = src.read(buf[:n], &res, start); err != nil {
				return err
			}
			if err := writeAll(int(f.Fd()), buf[:n], &res); err != nil {
				return fmt.Errorf("write %s at %d: %w", *file, written, err)
			}
		}
		if err := p.wrote(written, n); err != nil {
			return fmt.Errorf("pace %s at %d: %w", *file, written, err)
		}
		written += n
	}
	wrote := time.Since(start)
	var synced time.Duration
	if *sync {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("fsync %s: %w", *file, err)
		}
		synced = time.Since(start) - wrote
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", *file, err)
	}
	if src != nil {
		if res.FeederShortWrites, err = src.close(); err != nil {
			return err
		}
	}
	res.Bytes, res.WriteSeconds, res.FsyncSeconds = written, wrote.Seconds(), synced.Seconds()
	return json.NewEncoder(os.Stdout).Encode(res)
}

// maxDemand bounds one on-demand write.
const maxDemand = 1 << 30

// onDemand writes to f the byte counts read from in, one per line, each in
// one write(2), printing to out the CLOCK_MONOTONIC time in nanoseconds at
// which each write began (the clock bpf_ktime_get_ns and the tracker's
// events use).
func onDemand(f *os.File, in io.Reader, out io.Writer) error {
	w := bufio.NewWriter(out)
	if _, err := fmt.Fprintln(w, "ready"); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	var buf []byte
	for line := 1; sc.Scan(); line++ {
		n, err := strconv.ParseUint(strings.TrimSpace(sc.Text()), 10, 64)
		if err != nil || n == 0 || n > maxDemand {
			return fmt.Errorf("standard input line %d: invalid byte count %q: want a whole number from 1 to %d", line, sc.Text(), maxDemand)
		}
		if uint64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			return fmt.Errorf("clock_gettime: %w", err)
		}
		if _, err := f.Write(buf[:n]); err != nil {
			return fmt.Errorf("write %s: %w", f.Name(), err)
		}
		if _, err := fmt.Fprintln(w, ts.Nano()); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return sc.Err()
}

// pacer keeps at most budget bytes of the file dirty or under writeback:
// what a throttle that holds dirty+writeback at that level with no
// reaction delay would let through, and with every dirty page sent to
// the device at once. It is the ceiling against which memcgd's throttle
// is measured (experiments/e1, arm selfpaced). A zero budget does
// nothing.
type pacer struct {
	fd            int
	budget, chunk uint64
	// waited is the offset below which the file's pages are known
	// written.
	waited uint64
}

// wrote starts the write-out of the n bytes just written at off and
// waits, oldest chunk first, until what is outstanding fits the budget.
func (p *pacer) wrote(off, n uint64) error {
	if p.budget == 0 {
		return nil
	}
	if err := unix.SyncFileRange(p.fd, int64(off), int64(n), unix.SYNC_FILE_RANGE_WRITE); err != nil {
		return err
	}
	for off+n-p.waited > p.budget {
		const wait = unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WRITE | unix.SYNC_FILE_RANGE_WAIT_AFTER
		if err := unix.SyncFileRange(p.fd, int64(p.waited), int64(p.chunk), wait); err != nil {
			return err
		}
		p.waited += p.chunk
	}
	return nil
}
