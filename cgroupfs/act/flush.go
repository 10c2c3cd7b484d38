package act

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/cgroupfs/safeio"
	"github.com/memcgd/memcgd/host"
)

// A full flush, syncfs(2), writes out every dirty page of a filesystem,
// every cgroup's, and waits for the disk: it is the kernel's answer to a
// cgroup's reclaim meeting dirty pages (mm/vmscan.c shrink_inactive_list
// via wakeup_flusher_threads) and seed 000's fallback when targeted
// write-out finds too little. Asked for on a tenant's behalf, it must not
// let the tenant drive the disk: so the Flusher
//
//   - never calls sync(2): a cgroup whose writers closed their files has
//     no filesystem to flush, and gets host.ErrNothingToFlush;
//   - starts at most one full flush per Interval, host-wide, whichever
//     cgroups ask (host.ErrRateLimited otherwise);
//   - runs it on a goroutine of its own, so the caller returns at once,
//     with at most MaxInFlight running;
//   - coalesces: a request for a filesystem with a flush in progress is
//     satisfied by that flush. A syncfs that never returns (a hung disk)
//     thus stops further flushes of its filesystem, not of others.

// Defaults of FlushOptions.
const (
	DefaultFlushInterval    = time.Second
	DefaultMaxFlushInFlight = 2
)

// FlushOptions limits full flushes.
type FlushOptions struct {
	// Interval is the least time between two full flushes started,
	// host-wide; default DefaultFlushInterval.
	Interval time.Duration
	// MaxInFlight is how many full flushes may run at once; default
	// DefaultMaxFlushInFlight.
	MaxInFlight int

	// syncfs and now replace syncfs(2) and the clock in tests.
	syncfs func(fd int) error
	now    func() time.Time
}

func (o FlushOptions) withDefaults() (FlushOptions, error) {
	switch {
	case o.Interval < 0:
		return o, fmt.Errorf("flush options: Interval %v: want 0 (default %v) or more", o.Interval, DefaultFlushInterval)
	case o.Interval == 0:
		o.Interval = DefaultFlushInterval
	}
	switch {
	case o.MaxInFlight < 0:
		return o, fmt.Errorf("flush options: MaxInFlight %d: want 0 (default %d) or more", o.MaxInFlight, DefaultMaxFlushInFlight)
	case o.MaxInFlight == 0:
		o.MaxInFlight = DefaultMaxFlushInFlight
	}
	if o.syncfs == nil {
		o.syncfs = unix.Syncfs
	}
	if o.now == nil {
		o.now = time.Now
	}
	return o, nil
}

// FlushResult says what a flush request did.
type FlushResult int

const (
	// FlushNothing: the cgroup's tasks hold no file on a safe filesystem
	// open for writing or mapped shared and writable.
	FlushNothing FlushResult = iota
	// FlushStarted: a full flush of one of its filesystems started.
	FlushStarted
	// FlushCoalesced: a flush of one of its filesystems is in progress.
	FlushCoalesced
	// FlushRateLimited: none could start, for the host-wide rate or the
	// bound on flushes in flight.
	FlushRateLimited
)

func (r FlushResult) String() string {
	return [...]string{"nothing to flush", "started", "coalesced", "rate-limited"}[r]
}

// Flusher starts full flushes, rate-limited host-wide. It is safe for
// concurrent use.
type Flusher struct {
	opts FlushOptions
	bio  *safeio.BoundedIO
	log  *slog.Logger

	mu       sync.Mutex
	last     time.Time       // when the last flush started
	inFlight map[uint64]bool // filesystems being flushed, by device number
	wg       sync.WaitGroup  // running flushes
}

// NewFlusher returns a Flusher whose opens run under bio.
func NewFlusher(opts FlushOptions, bio *safeio.BoundedIO, log *slog.Logger) (*Flusher, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Flusher{opts: opts, bio: bio, log: log, inFlight: make(map[uint64]bool)}, nil
}

// Wait waits for the flushes in progress, or ctx's end.
func (fl *Flusher) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { fl.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Flush asks for a full flush of the filesystems cg's tasks write to:
// those of the files they have open for writing or mapped shared and
// writable, found as WriteOut finds them. It returns at once, saying
// whether a flush started, one was in progress, or none could start; it
// never waits for the disk. The flush itself is syncfs(2), which returns
// once the filesystem's dirty data and metadata are on disk (fs/sync.c
// sync_filesystem).
func (fl *Flusher) Flush(ctx context.Context, procRoot string, l layout.Layout, cg host.Cgroup) (FlushResult, error) {
	dir := l.Memory.Dir(cg)
	if dir == "" {
		return FlushNothing, fmt.Errorf("flush %s: outside the mounted memory hierarchy %s", cg, l.Memory.Mount)
	}
	files, mounts, err := listFiles(ctx, fl.bio, procRoot, dir, true)
	if err != nil {
		return FlushNothing, fmt.Errorf("flush %s: %w", cg, err)
	}
	result := FlushNothing
	for _, tf := range files {
		r := fl.admit(tf.dev)
		if r != FlushStarted {
			result = preferred(result, r)
			continue
		}
		f, err := fl.open(ctx, procRoot, tf, mounts)
		if err != nil {
			// Gone, or no longer the file listed. The slot stays used: a
			// tenant that swaps descriptors gains no extra flushes.
			fl.finish(tf.dev)
			result = preferred(result, FlushRateLimited)
			continue
		}
		fl.wg.Add(1)
		go fl.syncfs(cg, tf.dev, f)
		return FlushStarted, nil
	}
	switch result {
	case FlushNothing:
		return result, fmt.Errorf("flush %s: %w", cg, host.ErrNothingToFlush)
	case FlushRateLimited:
		return result, fmt.Errorf("flush %s: a full flush started less than %v ago or %d are running: %w",
			cg, fl.opts.Interval, fl.opts.MaxInFlight, host.ErrRateLimited)
	}
	return result, nil
}

// admit decides on a flush of the filesystem dev: FlushCoalesced if one
// is in progress, FlushRateLimited if the rate or the bound on flushes in
// flight forbids one, else FlushStarted, having reserved it: the caller
// must call finish(dev) when the flush is over or did not happen.
func (fl *Flusher) admit(dev uint64) FlushResult {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	now := fl.opts.now()
	switch {
	case fl.inFlight[dev]:
		return FlushCoalesced
	case !fl.last.IsZero() && now.Sub(fl.last) < fl.opts.Interval, len(fl.inFlight) >= fl.opts.MaxInFlight:
		return FlushRateLimited
	}
	fl.inFlight[dev], fl.last = true, now
	return FlushStarted
}

// finish ends the flush of dev that admit reserved.
func (fl *Flusher) finish(dev uint64) {
	fl.mu.Lock()
	delete(fl.inFlight, dev)
	fl.mu.Unlock()
}

// preferred returns what to report of two outcomes for a cgroup's
// filesystems: a flush in progress over one refused, either over none.
func preferred(a, b FlushResult) FlushResult {
	rank := map[FlushResult]int{FlushNothing: 0, FlushRateLimited: 1, FlushCoalesced: 2, FlushStarted: 3}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// open opens tf for the flush, checked, under the bound.
func (fl *Flusher) open(ctx context.Context, procRoot string, tf taskFile, mounts *safeio.Mounts) (*os.File, error) {
	var (
		cf   *os.File
		ferr error
	)
	err := fl.bio.Run(ctx, tf.key(), func() {
		pfd, err := unix.Open(tf.path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			ferr = err
			return
		}
		defer unix.Close(pfd)
		f, _, err := safeio.CheckedReopen(procRoot, pfd, tf.want, mounts)
		if err != nil {
			ferr = err
			return
		}
		cf = f
	}, func() {
		if cf != nil {
			cf.Close() // opened after all, too late
		}
	})
	if err != nil {
		return nil, err
	}
	return cf, ferr
}

// syncfs flushes the filesystem of f and closes it.
func (fl *Flusher) syncfs(cg host.Cgroup, dev uint64, f *os.File) {
	defer fl.wg.Done()
	start := fl.opts.now()
	err := fl.opts.syncfs(int(f.Fd()))
	f.Close()
	fl.finish(dev)
	if err != nil {
		fl.log.Warn("syncfs", "cgroup", cg, "device", fmt.Sprintf("%d:%d", unix.Major(dev), unix.Minor(dev)), "err", err)
		return
	}
	fl.log.Debug("syncfs", "cgroup", cg, "device", fmt.Sprintf("%d:%d", unix.Major(dev), unix.Minor(dev)),
		"took", fl.opts.now().Sub(start))
}
