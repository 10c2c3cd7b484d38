package dirtytrack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"
)

// Kind is what an Event reports.
type Kind uint32

// The event kinds, as enum event_type in bpf/dirtytrack.c.
const (
	// Wake: a watched cgroup's dirtied count passed its threshold.
	Wake Kind = 1
	// Mkdir: a memory cgroup was created.
	Mkdir Kind = 2
	// Rmdir: a memory cgroup was removed; the tracker has unwatched it.
	Rmdir Kind = 3
	// NewDirtier: a thread new to a watched cgroup's dirtiers began to
	// dirty its pages, and ArmDirtier had asked for it.
	NewDirtier Kind = 4
	// LevelCrossed: a watched cgroup's level left the bounds ArmLevel
	// set.
	LevelCrossed Kind = 5
)

// String returns "wake", "mkdir" or "rmdir".
func (k Kind) String() string {
	switch k {
	case Wake:
		return "wake"
	case Mkdir:
		return "mkdir"
	case Rmdir:
		return "rmdir"
	case NewDirtier:
		return "dirtier"
	case LevelCrossed:
		return "level"
	}
	return fmt.Sprintf("kind(%d)", uint32(k))
}

// Event is a wake-up or a cgroup's creation or removal.
type Event struct {
	Kind Kind
	// ID is the cgroup's id.
	ID uint64
	// Dirtied is, for Wake, the cgroup's count when it passed the
	// threshold.
	Dirtied uint64
	// TID is, for NewDirtier, the thread that began dirtying.
	TID int
	// DirtyLevel is, for LevelCrossed, the level (Counts.Level) that
	// crossed a bound.
	DirtyLevel int64
	// Time is when the kernel sent it, on CLOCK_MONOTONIC (time since
	// boot, suspend excluded): compare with MonotonicNow.
	Time time.Duration
	// Read is when the tracker took it from the ring buffer, on the same
	// clock: Read − Time is the ring buffer's delivery.
	Read time.Duration
	// Level, Parent and Path describe a created or removed cgroup: its
	// depth (1 for a child of the root), its parent's id, and its path in
	// the memory hierarchy as the kernel's cgroup_path() prints it,
	// truncated to 255 bytes.
	Level  int
	Parent uint64
	Path   string
}

// Record layouts of bpf/dirtytrack.c (struct wake_event, struct
// cgroup_event).
const (
	wakeEventSize   = 32
	cgroupEventSize = 32 + 256
)

// decodeEvent decodes one ring-buffer record.
func decodeEvent(b []byte) (Event, error) {
	if len(b) < wakeEventSize {
		return Event{}, fmt.Errorf("dirtytrack event: %d bytes, want at least %d", len(b), wakeEventSize)
	}
	le := binary.LittleEndian
	ev := Event{Kind: Kind(le.Uint32(b[0:]))}
	switch ev.Kind {
	case Wake, NewDirtier, LevelCrossed:
		ev.TID = int(le.Uint32(b[4:]))
		ev.ID = le.Uint64(b[8:])
		ev.Dirtied = le.Uint64(b[16:])
		ev.Time = time.Duration(le.Uint64(b[24:]))
		if ev.Kind == LevelCrossed {
			ev.DirtyLevel, ev.Dirtied = int64(ev.Dirtied), 0
		}
	case Mkdir, Rmdir:
		if len(b) < cgroupEventSize {
			return Event{}, fmt.Errorf("dirtytrack %s event: %d bytes, want %d", ev.Kind, len(b), cgroupEventSize)
		}
		ev.Level = int(le.Uint32(b[4:]))
		ev.ID = le.Uint64(b[8:])
		ev.Parent = le.Uint64(b[16:])
		ev.Time = time.Duration(le.Uint64(b[24:]))
		p := b[32:cgroupEventSize]
		if i := bytes.IndexByte(p, 0); i >= 0 {
			p = p[:i]
		}
		ev.Path = string(p)
	default:
		return Event{}, fmt.Errorf("dirtytrack event: type %d: want 1 (wake), 2 (mkdir), 3 (rmdir), 4 (dirtier) or 5 (level)", ev.Kind)
	}
	return ev, nil
}

// Events delivers wake-ups and cgroup creations and removals. Wake-ups
// come in the order the kernel sent them, and so do cgroup events; the two
// kinds travel in separate rings and may interleave out of order. It is
// closed by Close. A consumer that falls behind by EventBuffer events
// stalls the readers: the kernel then retries wake-ups (Stats.WakeRetries)
// and drops cgroup events (Stats.Dropped) rather than block.
func (t *Tracker) Events() <-chan Event { return t.out }

// Handle makes the tracker call fn with every event instead of sending it
// to Events, on the goroutine that read it from the kernel's ring: one
// per ring, so wake-ups and cgroup events may be handled concurrently,
// each kind in order. Events already waiting in Events are handed to fn
// first. It saves a wake-up its hand-off from one goroutine to another,
// which took 265 µs at the median and 1.9 ms at p90 while a writer ran at
// full speed on the 2-CPU host (test/daemon's unpaced writer test). fn
// must return soon: while it runs its ring is not read.
func (t *Tracker) Handle(fn func(Event)) {
	t.handler.Store(&fn)
	t.drain(fn)
}

// drain hands the events waiting in Events to fn.
func (t *Tracker) drain(fn func(Event)) {
	for {
		select {
		case ev, ok := <-t.out:
			if !ok {
				return
			}
			fn(ev)
		default:
			return
		}
	}
}

// readEvents moves records from a ring buffer to Events, or to the
// handler.
func (t *Tracker) readEvents(r ring) {
	defer t.wg.Done()
	var rec ringbuf.Record
	for {
		err := r.reader.ReadInto(&rec)
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			// Drained (openRing set the reader's deadline in the past):
			// wait on the runtime's poller.
			if err := r.wait(); err != nil {
				return // closed
			}
			continue
		case errors.Is(err, ringbuf.ErrClosed):
			return
		default:
			t.opts.Logger.Warn("dirty tracker: read ring buffer", "err", err)
			continue
		}
		read := MonotonicNow()
		ev, err := decodeEvent(rec.RawSample)
		ev.Read = read
		if err != nil {
			t.opts.Logger.Warn("dirty tracker: bad event", "err", err)
			continue
		}
		if ev.Kind == Rmdir {
			if err := t.Unwatch(ev.ID); err != nil {
				t.opts.Logger.Warn("dirty tracker: unwatch removed cgroup", "id", ev.ID, "path", ev.Path, "err", err)
			}
		}
		if h := t.handler.Load(); h != nil {
			(*h)(ev)
			continue
		}
		select {
		case t.out <- ev:
		case <-t.done:
			return
		}
		if h := t.handler.Load(); h != nil {
			// Handle came after the check above, and may have drained
			// Events before the send: the event would wait there for
			// ever.
			t.drain(*h)
		}
	}
}

// MonotonicNow returns CLOCK_MONOTONIC, the clock of Event.Time.
func MonotonicNow() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("clock_gettime(CLOCK_MONOTONIC): %v", err)) // cannot fail on Linux
	}
	return time.Duration(ts.Nano())
}
