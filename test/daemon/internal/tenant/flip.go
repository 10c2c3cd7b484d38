package tenant

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// FlipOptions configure Flip.
type FlipOptions struct {
	// Dir is where the tenant creates its files.
	Dir string
	// Files is how many files it keeps open for writing, at most
	// maxFiles.
	Files int
	// Rate is the bytes per second it appends to them, in all.
	Rate uint64
	// Duration is how long the flipping lasts.
	Duration time.Duration
}

func parseFlip(args []string) (FlipOptions, error) {
	var o FlipOptions
	if err := wantArgs(args, "dir", "files", "rate", "duration"); err != nil {
		return o, err
	}
	o.Dir = args[0]
	n, err := parseUint("files", args[1])
	if err != nil {
		return o, err
	}
	if n == 0 || n > maxFiles {
		return o, fmt.Errorf("files %d: want 1 to %d", n, maxFiles)
	}
	o.Files = int(n)
	if o.Rate, err = parseUint("rate", args[2]); err != nil {
		return o, err
	}
	if o.Duration, err = parseDuration("duration", args[3]); err != nil {
		return o, err
	}
	return o, nil
}

// The descriptor numbers of Flip: slots are what the daemon lists and
// what the tenant flips; each slot's file is kept open at its backup too,
// so that it can be put back. Both ranges have three digits, so that
// /proc/PID/fd, listed in name order, shows every slot before any backup,
// and a daemon that lists each file once lists it at its slot.
const (
	slotFD   = 100
	backupFD = 200
	maxFiles = 99
)

// oddNames are the names Flip gives its files, cycled: a newline, invalid
// UTF-8, terminal escapes, quotes, a name ending as a deleted file's link
// does, and the longest name ext4 allows.
var oddNames = []string{
	"plain",
	"new\nline",
	"bad\xff\xfeutf8",
	"\x1b[31mred\x1b[0m",
	`quote"and\back'slash`,
	"tab\tand space",
	"looks (deleted)",
	"-rf --",
	strings.Repeat("long", 64)[:253],
}

// Flip is issue 9's fd flip: the tenant holds Files regular files open
// for writing, appends to them so that the daemon has dirty pages to
// write out, and meanwhile keeps replacing each file's descriptor slot
// (dup2) with an O_PATH descriptor of a root-only device, of a FIFO, or
// with a socket, and putting the file back. A daemon that lists the
// slot while it holds the file and reopens /proc/PID/fd/N later opens
// whatever the slot holds then. Every Files-th file is unlinked after it
// is opened.
func Flip(o FlipOptions) error {
	for i := range o.Files {
		name := fmt.Sprintf("%02d-%s", i, oddNames[i%len(oddNames)])
		name = name[:min(len(name), 255)]
		p := filepath.Join(o.Dir, name)
		fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("create %q: %w", p, err)
		}
		if err := unix.Dup3(fd, backupFD+i, 0); err != nil {
			return fmt.Errorf("dup %q to fd %d: %w", p, backupFD+i, err)
		}
		if err := unix.Dup3(fd, slotFD+i, 0); err != nil {
			return fmt.Errorf("dup %q to fd %d: %w", p, slotFD+i, err)
		}
		unix.Close(fd)
		if i == o.Files-1 {
			if err := unix.Unlink(p); err != nil {
				return fmt.Errorf("unlink %q: %w", p, err)
			}
		}
	}
	socks, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socketpair: %w", err)
	}

	errc := make(chan error, 1)
	stop := make(chan struct{})
	go func() { errc <- appendLoop(o, stop) }()
	ready("files=%d", o.Files)

	// One cycle: the file for 2 ms, then something else for 1 ms, in
	// turn the device, the FIFO and the socket. Any reopen of a slot
	// thus meets a file about two times in three.
	phases := []struct {
		src  int // -1: the slot's own file
		hold time.Duration
	}{{-1, 2 * time.Millisecond}, {DeviceFD, time.Millisecond}, {-1, 2 * time.Millisecond}, {FIFOFD, time.Millisecond},
		{-1, 2 * time.Millisecond}, {socks[0], time.Millisecond}}
	end := time.Now().Add(o.Duration)
	for time.Now().Before(end) {
		for _, ph := range phases {
			for i := range o.Files {
				src := ph.src
				if src < 0 {
					src = backupFD + i
				}
				if err := unix.Dup3(src, slotFD+i, 0); err != nil {
					close(stop)
					return fmt.Errorf("dup %d to slot %d: %w", src, slotFD+i, err)
				}
			}
			time.Sleep(ph.hold)
		}
		select {
		case err := <-errc:
			return err
		default:
		}
	}
	close(stop)
	return <-errc
}

// appendLoop appends to the files round-robin, through their backups, at
// o.Rate bytes per second, in 100 steps a second, until stop closes.
func appendLoop(o FlipOptions, stop <-chan struct{}) error {
	const steps = 100
	buf := make([]byte, max(o.Rate/steps, 1))
	for i := range buf {
		buf[i] = byte(i)
	}
	tick := time.NewTicker(time.Second / steps)
	defer tick.Stop()
	for i := 0; ; i = (i + 1) % o.Files {
		select {
		case <-stop:
			return nil
		case <-tick.C:
		}
		if _, err := unix.Write(backupFD+i, buf); err != nil {
			return fmt.Errorf("append to fd %d: %w", backupFD+i, err)
		}
	}
}
