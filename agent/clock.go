package agent

import "time"

// Clock is the agent's time: when to step a cgroup again (NextLook) and
// the throttle's own deadlines (HoldFor, RunFor). Tests drive the loop on
// a fake one; the daemon uses the wall clock (nil Options.Clock).
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that sends on C once d has passed.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f on a goroutine of its own once d has passed; the
	// returned timer's C is nil.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a time.Timer of a Clock.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; false if it fired or was
	// stopped already.
	Stop() bool
	// Reset makes the timer fire d from now.
	Reset(d time.Duration)
}

// wallClock is the real time.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) NewTimer(d time.Duration) Timer { return wallTimer{time.NewTimer(d)} }

func (wallClock) AfterFunc(d time.Duration, f func()) Timer { return wallTimer{time.AfterFunc(d, f)} }

type wallTimer struct{ t *time.Timer }

func (w wallTimer) C() <-chan time.Time   { return w.t.C }
func (w wallTimer) Stop() bool            { return w.t.Stop() }
func (w wallTimer) Reset(d time.Duration) { w.t.Reset(d) }
