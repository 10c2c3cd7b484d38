package cputime

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Thread returns the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID),
// 0 if unreadable. It is a goroutine's only while the goroutine is locked
// to its thread (runtime.LockOSThread).
func Thread() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// A Sink sums the CPU time spent on one operation's behalf on goroutines
// other than the one that carries it out (Measure). It is safe for
// concurrent use.
type Sink struct{ ns atomic.Int64 }

// Load returns the CPU time added so far.
func (s *Sink) Load() time.Duration { return time.Duration(s.ns.Load()) }

type sinkKey struct{}

// WithSink returns ctx carrying s, for Measure.
func WithSink(ctx context.Context, s *Sink) context.Context {
	return context.WithValue(ctx, sinkKey{}, s)
}

// Measure runs fn, locked to its thread, and adds the thread's CPU time
// over fn to ctx's Sink, if it carries one. fn runs on the calling
// goroutine, with a context under which Wait unlocks the thread while fn
// waits for other goroutines; without a Sink fn gets ctx itself.
func Measure(ctx context.Context, fn func(context.Context)) {
	s, _ := ctx.Value(sinkKey{}).(*Sink)
	if s == nil {
		fn(ctx)
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	m := &meter{sink: s, since: Thread()}
	defer func() { s.ns.Add(int64(Thread() - m.since)) }()
	fn(context.WithValue(ctx, meterKey{}, m))
}

// A meter is one Measure's count in progress: its goroutine's thread's
// CPU clock when the current stretch on that thread began. Only that
// goroutine uses it.
type meter struct {
	sink  *Sink
	since time.Duration
}

type meterKey struct{}

// Wait calls wait, which blocks until other goroutines have done their
// part, with the calling goroutine's thread unlocked if ctx is the one
// Measure gave it (elsewhere it just calls wait). A goroutine locked to
// its thread that blocks on a channel makes the runtime hand its P to
// another thread and, when it is woken, hand the P back (runtime/proc.go,
// stoplockedm and startlockedm): two thread switches per wait, where an
// unlocked goroutine is resumed on the thread that woke it. The thread's
// CPU time up to the wait is added to the Sink, and counting begins again
// on whichever thread resumes it. Only the goroutine running Measure's fn
// may call it with fn's context.
func Wait(ctx context.Context, wait func()) {
	m, _ := ctx.Value(meterKey{}).(*meter)
	if m == nil {
		wait()
		return
	}
	m.sink.ns.Add(int64(Thread() - m.since))
	runtime.UnlockOSThread()
	defer func() {
		runtime.LockOSThread()
		m.since = Thread()
	}()
	wait()
}
