package tenant

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// StormOptions configure Storm.
type StormOptions struct {
	// UsageFile is the tenant's cgroup's usage file (v1
	// memory.usage_in_bytes, v2 memory.current), which it reads while it
	// fills its anonymous memory.
	UsageFile string
	// Limit is the cgroup's hard limit; Headroom how far below it the
	// fill stops.
	Limit, Headroom uint64
	// File is rewritten, one byte, every Period.
	File   string
	Period time.Duration
	// Clean is a file the tenant reads through when the storm starts and
	// every cleanReadEvery, which charges its pages to the cgroup at its
	// limit: the kernel reclaims them at once (they are clean), and the
	// charge at the limit is what a daemon's watch of the cgroup hears
	// (v1 memory.failcnt, v2 memory.events.local "max"). In between, the
	// cgroup holds little but anonymous memory, as in the reproduction.
	Clean string
	// Duration is how long the storm lasts.
	Duration time.Duration
}

func parseStorm(args []string) (StormOptions, error) {
	var o StormOptions
	if err := wantArgs(args, "usage-file", "limit", "headroom", "file", "period", "clean-file", "duration"); err != nil {
		return o, err
	}
	var err error
	o.UsageFile, o.File, o.Clean = args[0], args[3], args[5]
	if o.Limit, err = parseUint("limit", args[1]); err != nil {
		return o, err
	}
	if o.Headroom, err = parseUint("headroom", args[2]); err != nil {
		return o, err
	}
	if o.Period, err = parseDuration("period", args[4]); err != nil {
		return o, err
	}
	if o.Duration, err = parseDuration("duration", args[6]); err != nil {
		return o, err
	}
	return o, nil
}

// cleanReadEvery is how often Storm reads Clean through.
const cleanReadEvery = 5 * time.Second

// fillChunk is the unit of the anonymous fill: the fill ends at most
// this far above its target. fillPause is the pause after each chunk: a
// daemon that re-arms its watch of the cgroup's usage one step behind a
// fill that runs too fast can miss the crossing of its low watermark.
const (
	fillChunk = 256 << 10
	fillPause = 5 * time.Millisecond
)

// Storm is issue 9's sync storm, as reproduced on 5e712c6: the tenant
// holds anonymous memory until its cgroup's usage is Headroom below its
// limit (or up to fillChunk less), so that its free
// memory stays below any low watermark and nothing it holds is
// reclaimable (no swap), and rewrites one byte of a file every Period,
// opening and closing it each time: one dirty page, in a file no task
// holds open. A daemon whose reclaim needs that page written, and finds
// no file to write out, falls back to a flush; each flush it makes is
// one the tenant asked for. Now and then it also reads Clean through,
// so that the cgroup hits its limit.
func Storm(o StormOptions) error {
	target := o.Limit - min(o.Headroom, o.Limit)
	var anon uint64
	for {
		usage, err := readUint(o.UsageFile)
		if err != nil {
			return err
		}
		if usage >= target {
			break
		}
		m, err := unix.Mmap(-1, 0, fillChunk, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return fmt.Errorf("map %d bytes of anonymous memory: %w", fillChunk, err)
		}
		for i := 0; i < len(m); i += os.Getpagesize() {
			m[i] = 1 // a private page of its own, not the shared zero page
		}
		anon += fillChunk
		time.Sleep(fillPause)
	}
	usage, err := readUint(o.UsageFile)
	if err != nil {
		return err
	}
	ready("anon=%d usage=%d", anon, usage)

	b := []byte{0}
	buf := make([]byte, 64<<10)
	tick := time.NewTicker(o.Period)
	defer tick.Stop()
	end := time.After(o.Duration)
	var lastRead time.Time
	for {
		select {
		case <-end:
			return nil
		case <-tick.C:
		}
		if time.Since(lastRead) >= cleanReadEvery {
			if err := readThrough(o.Clean, buf); err != nil {
				return err
			}
			lastRead = time.Now()
		}
		fd, err := unix.Open(o.File, unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return fmt.Errorf("open %s: %w", o.File, err)
		}
		b[0]++
		_, err = unix.Pwrite(fd, b, 0)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("write %s: %w", o.File, err)
		}
	}
}

// readThrough reads the file at p to its end, through buf.
func readThrough(p string, buf []byte) error {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", p, err)
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Read(fd, buf)
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		if n == 0 {
			return nil
		}
	}
}

// readUint reads a cgroupfs file holding one decimal number.
func readUint(p string) (uint64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read %s: %q: want a decimal number", p, b)
	}
	return n, nil
}
