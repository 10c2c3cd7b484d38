// Command writer is the experiments' dd: it writes a new file sequentially
// in fixed-size chunks through the page cache, unpaced or paced by a token
// bucket, and prints what it did as one JSON line (lab.WriterResult).
//
//	writer -file /var/tmp/f -size 2G -chunk 1M -rate 100M [-fsync]
//
// -rate is in bytes per second with memparse suffixes (100M is 100 MiB/s);
// 0 writes as fast as the kernel lets it. The bucket holds one chunk, so a
// writer held up (by reclaim, by a throttle) does not burst afterwards to
// catch up: it writes at most -rate from then on, as a paced producer
// would.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

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
		sync  = flag.Bool("fsync", false, "fsync the file after writing it, timed separately")
	)
	flag.Var(&size, "size", "bytes to write")
	flag.Var(&chunk, "chunk", "bytes per write(2)")
	flag.Var(&rate, "rate", "bytes per second; 0 is unpaced")
	flag.Parse()
	if *file == "" {
		return fmt.Errorf("-file: missing: want the path of a file to create")
	}
	if chunk == 0 {
		return fmt.Errorf("-chunk: invalid value 0: want at least one byte")
	}
	f, err := os.OpenFile(*file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, chunk)

	start := time.Now()
	b := bucket{rate: float64(rate), capacity: float64(chunk), tokens: float64(chunk), last: start}
	var written uint64
	for written < uint64(size) {
		n := min(uint64(chunk), uint64(size)-written)
		b.take(float64(n))
		if _, err := f.Write(buf[:n]); err != nil {
			return fmt.Errorf("write %s at %d: %w", *file, written, err)
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
	return json.NewEncoder(os.Stdout).Encode(lab.WriterResult{
		Bytes: written, WriteSeconds: wrote.Seconds(), FsyncSeconds: synced.Seconds(),
	})
}

// bucket is a token bucket of bytes; a zero rate never waits.
type bucket struct {
	rate, capacity, tokens float64
	last                   time.Time
}

// take waits until n bytes' tokens are in the bucket and takes them.
func (b *bucket) take(n float64) {
	if b.rate == 0 {
		return
	}
	now := time.Now()
	b.tokens = min(b.capacity, b.tokens+b.rate*now.Sub(b.last).Seconds())
	b.last = now
	if b.tokens < n {
		wait := time.Duration((n - b.tokens) / b.rate * float64(time.Second))
		time.Sleep(wait)
		now = time.Now()
		b.tokens = min(b.capacity, b.tokens+b.rate*now.Sub(b.last).Seconds())
		b.last = now
	}
	b.tokens -= n
}
