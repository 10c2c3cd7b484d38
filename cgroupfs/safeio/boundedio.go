// Package safeio bounds and checks what memcgd does to the files of a
// tenant's tasks: BoundedIO runs each blocking file operation with a
// deadline and stops issuing them on a filesystem (or a cgroup's task
// listing) that stopped answering; CheckedReopen opens a file memcgd
// listed only after checking, on a descriptor the tenant cannot change,
// that it is a regular file on a local disk filesystem (SafeFS), still the
// one listed; Mounts is the table of mounts that check reads.
//
// Invariants: no call waits past IOOptions.Timeout for a file; at most
// IOOptions.MaxStuck abandoned operations are blocked at once, and none is
// issued on a key whose earlier operation is still blocked; no tenant's
// /proc link is ever opened for I/O without the check.
package safeio

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/memcgd/memcgd/internal/cputime"
)

// A file operation on a tenant's file can block for as long as the
// filesystem likes: open, stat and close (FUSE_FLUSH) on FUSE wait for a
// daemon the tenant may run, and on NFS or CIFS for a server that may be
// gone; reading /proc/PID/maps waits for the task's mmap_lock, which a
// task faulting on such a file holds. No such call can be interrupted
// from userspace. BoundedIO runs them on goroutines of their own and
// stops waiting at a deadline: the call that overran is abandoned (its
// goroutine stays blocked in the kernel, and releases what it holds if it
// ever returns), its key (a filesystem, or a cgroup's tasks) is marked stuck, and no
// new call is issued on a stuck key until the abandoned one returns. At
// most MaxStuck calls can be abandoned at once; past that, every call is
// refused until one returns. A worker therefore never waits more than
// Timeout for a file, and a hostile filesystem costs at most MaxStuck
// goroutines.

// Defaults of IOOptions.
const (
	DefaultIOTimeout = 2 * time.Second
	DefaultMaxStuck  = 8
)

// IOOptions bounds the blocking file operations of write-out and flush.
type IOOptions struct {
	// Timeout is how long one operation may take before it is abandoned;
	// default DefaultIOTimeout.
	Timeout time.Duration
	// MaxStuck is how many abandoned operations may be blocked in the
	// kernel at once; default DefaultMaxStuck.
	MaxStuck int
}

// ErrStuck reports an operation refused or abandoned by BoundedIO: the
// filesystem or task did not answer within the deadline, or too many
// earlier operations are still blocked.
var ErrStuck = errors.New("file operation did not complete in time")

// ErrRefused marks an ErrStuck for an operation that was never started.
var ErrRefused = errors.New("refused")

// Key names what an operation may block on: a filesystem (by mount ID or
// device number) or the tasks of a cgroup (their mmap_locks).
type Key struct {
	kind byte // 'm' mount ID, 'd' device number, 'c' a cgroup's listing (hash of its directory)
	id   uint64
}

// MountKey is the key of the filesystem at mount ID id.
func MountKey(id uint64) Key { return Key{'m', id} }

// DeviceKey is the key of the filesystem with device number dev.
func DeviceKey(dev uint64) Key { return Key{'d', dev} }

// ListingKey is the key of the listing of the tasks of the cgroup at dir.
func ListingKey(dir string) Key { return Key{'c', fnv64(dir)} }

// fnv64 is the FNV-1a hash of s.
func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// String names the key for messages: "mount N", "device MAJ:MIN", "listing
// of cgroup HASH".
func (k Key) String() string {
	switch k.kind {
	case 'm':
		return fmt.Sprintf("mount %d", k.id)
	case 'd':
		return fmt.Sprintf("device %d:%d", k.id>>32, k.id&(1<<32-1))
	}
	return fmt.Sprintf("listing of cgroup %x", k.id)
}

// BoundedIO runs blocking file operations with a deadline. It is safe for
// concurrent use; its zero value is not usable: see NewBoundedIO.
type BoundedIO struct {
	opts IOOptions

	mu     sync.Mutex
	stuck  map[Key]int // abandoned operations still blocked, by key
	nstuck int
}

// NewBoundedIO returns a BoundedIO with opts, zero fields defaulted.
func NewBoundedIO(opts IOOptions) (*BoundedIO, error) {
	switch {
	case opts.Timeout < 0:
		return nil, fmt.Errorf("io options: Timeout %v: want 0 (default %v) or more", opts.Timeout, DefaultIOTimeout)
	case opts.Timeout == 0:
		opts.Timeout = DefaultIOTimeout
	}
	switch {
	case opts.MaxStuck < 0:
		return nil, fmt.Errorf("io options: MaxStuck %d: want 0 (default %d) or more", opts.MaxStuck, DefaultMaxStuck)
	case opts.MaxStuck == 0:
		opts.MaxStuck = DefaultMaxStuck
	}
	return &BoundedIO{opts: opts, stuck: make(map[Key]int)}, nil
}

// Stuck returns how many abandoned operations are still blocked.
func (b *BoundedIO) Stuck() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.nstuck
}

// Do runs fn, which may block on key, and waits for it until the
// deadline or ctx's end. fn must release whatever it acquires itself:
// once Do has returned ErrStuck, nobody waits for it. It is refused at
// once when key is stuck or MaxStuck operations are.
func (b *BoundedIO) Do(ctx context.Context, key Key, fn func()) error {
	return b.Run(ctx, key, fn, nil)
}

// Run is Do, and calls abandon, if not nil, on fn's goroutine after fn
// returns if Run gave up waiting for it: to release what fn acquired for
// the caller.
func (b *BoundedIO) Run(ctx context.Context, key Key, fn, abandon func()) error {
	b.mu.Lock()
	switch {
	case b.stuck[key] > 0:
		b.mu.Unlock()
		return fmt.Errorf("%s: an earlier operation is still blocked: %w (%w)", key, ErrStuck, ErrRefused)
	case b.nstuck >= b.opts.MaxStuck:
		b.mu.Unlock()
		return fmt.Errorf("%s: %d operations are blocked: %w (%w)", key, b.opts.MaxStuck, ErrStuck, ErrRefused)
	}
	b.mu.Unlock()

	done := make(chan struct{})
	abandoned := false // guarded by mu
	go func() {
		// Its CPU time is the caller's operation's (cputime.Sink).
		cputime.Measure(ctx, func(context.Context) { fn() })
		b.mu.Lock()
		// Closing done under mu makes the caller's "finished or
		// abandoned" decision and this one agree.
		close(done)
		if abandoned {
			if abandon != nil {
				abandon()
			}
			if b.stuck[key]--; b.stuck[key] == 0 {
				delete(b.stuck, key)
			}
			b.nstuck--
		}
		b.mu.Unlock()
	}()

	timer := time.NewTimer(b.opts.Timeout)
	defer timer.Stop()
	var why error
	cputime.Wait(ctx, func() {
		select {
		case <-done:
		case <-timer.C:
			why = fmt.Errorf("%s: no answer within %v: %w", key, b.opts.Timeout, ErrStuck)
		case <-ctx.Done():
			why = fmt.Errorf("%s: %w: %w", key, ErrStuck, ctx.Err())
		}
	})
	if why == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-done:
		return nil // finished meanwhile
	default:
	}
	abandoned = true
	b.stuck[key]++
	b.nstuck++
	return why
}
