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
// over fn to ctx's Sink, if it carries one. fn runs as it would without
// it: on the calling goroutine.
func Measure(ctx context.Context, fn func()) {
	s, _ := ctx.Value(sinkKey{}).(*Sink)
	if s == nil {
		fn()
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := Thread()
	defer func() { s.ns.Add(int64(Thread() - before)) }()
	fn()
}
