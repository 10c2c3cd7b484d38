package cputime

import (
	"context"
	"testing"
	"time"
)

// Measure adds fn's CPU time to the context's Sink, and runs fn the same
// without one.
func TestMeasureAddsToTheSink(t *testing.T) {
	var s Sink
	ctx := WithSink(context.Background(), &s)
	done := make(chan struct{})
	go func() { Measure(ctx, func(context.Context) { spin(20 * time.Millisecond) }); close(done) }()
	<-done
	if got := s.Load(); got < 20*time.Millisecond || got > time.Second {
		t.Errorf("sink holds %v after a 20ms spin on another goroutine, want about 20ms", got)
	}
	ran := false
	Measure(context.Background(), func(context.Context) { ran = true })
	if !ran {
		t.Error("without a sink fn did not run")
	}
}

// Wait leaves out of the count the time the measured goroutine waits, and
// counts its CPU time on both sides of the wait and the CPU time the
// goroutines it waits for measure into the same Sink.
func TestWaitCountsBothSidesOfTheWait(t *testing.T) {
	tests := []struct {
		name     string
		helper   time.Duration // CPU the goroutine waited for spins, measured
		sleep    time.Duration // and how long it sleeps after
		min, max time.Duration
	}{
		{"helper spins", 20 * time.Millisecond, 0, 60 * time.Millisecond, time.Second},
		{"helper sleeps", 0, 100 * time.Millisecond, 40 * time.Millisecond, 90 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s Sink
			Measure(WithSink(context.Background(), &s), func(ctx context.Context) {
				spin(20 * time.Millisecond)
				done := make(chan struct{})
				go func() {
					Measure(ctx, func(context.Context) { spin(tt.helper) })
					time.Sleep(tt.sleep)
					close(done)
				}()
				Wait(ctx, func() { <-done })
				spin(20 * time.Millisecond)
			})
			if got := s.Load(); got < tt.min || got > tt.max {
				t.Errorf("sink holds %v, want %v to %v", got, tt.min, tt.max)
			}
		})
	}
}

// Wait outside Measure just waits.
func TestWaitWithoutMeasure(t *testing.T) {
	ran := false
	Wait(context.Background(), func() { ran = true })
	if !ran {
		t.Error("wait did not run")
	}
}

// spin uses d of the calling thread's CPU time.
func spin(d time.Duration) {
	for start := Thread(); Thread()-start < d; {
	}
}
