package agent

import (
	"sort"
	"sync"
	"time"
)

// fakeClock is a Clock that moves only when the test advances it. A timer
// of AfterFunc runs its function on the advancing goroutine, in deadline
// order, so that a test steps the agent's throttle deadlines one by one.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

var _ Clock = (*fakeClock)(nil)

type fakeTimer struct {
	c      *fakeClock
	at     time.Time
	ch     chan time.Time // NewTimer's
	f      func()         // AfterFunc's
	active bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) Timer {
	return c.add(&fakeTimer{c: c, ch: make(chan time.Time, 1)}, d)
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	return c.add(&fakeTimer{c: c, f: f}, d)
}

func (c *fakeClock) add(t *fakeTimer, d time.Duration) *fakeTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t.at, t.active = c.now.Add(d), true
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.active = false
	return was
}

func (t *fakeTimer) Reset(d time.Duration) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.ch != nil {
		select {
		case <-t.ch:
		default:
		}
	}
	t.at, t.active = t.c.now.Add(d), true
	if !containsTimer(t.c.timers, t) {
		t.c.timers = append(t.c.timers, t)
	}
}

func containsTimer(ts []*fakeTimer, t *fakeTimer) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// next pops the earliest active timer due at or before limit.
func (c *fakeClock) next(limit time.Time) *fakeTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	live := c.timers[:0]
	for _, t := range c.timers {
		if t.active {
			live = append(live, t)
		}
	}
	c.timers = live
	sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	if len(c.timers) == 0 || c.timers[0].at.After(limit) {
		return nil
	}
	t := c.timers[0]
	c.timers = c.timers[1:]
	t.active = false
	if t.at.After(c.now) {
		c.now = t.at
	}
	return t
}

// AdvanceTo moves the clock to to, firing the timers due on the way in
// order; it stops early, at a timer's deadline, once stop reports true
// after that timer fired. It returns the clock's time.
func (c *fakeClock) AdvanceTo(to time.Time, stop func() bool) time.Time {
	for {
		t := c.next(to)
		if t == nil {
			break
		}
		if t.f != nil {
			t.f()
		} else {
			select {
			case t.ch <- t.at:
			default:
			}
		}
		if stop != nil && stop() {
			return c.Now()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if to.After(c.now) {
		c.now = to
	}
	return c.now
}

// Advance moves the clock d ahead, firing the timers due.
func (c *fakeClock) Advance(d time.Duration) time.Time {
	return c.AdvanceTo(c.Now().Add(d), nil)
}

// nextDeadline is the earliest deadline of an active timer after now.
func (c *fakeClock) nextDeadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var at time.Time
	for _, t := range c.timers {
		if t.active && t.at.After(c.now) && (at.IsZero() || t.at.Before(at)) {
			at = t.at
		}
	}
	return at, !at.IsZero()
}
