package cputime

import (
	"context"
	"testing"
	"time"
)

// Measure adds fn's CPU time to the context's Sink, and runs fn the same
// without one.
func TestMeasureAddsToTheSink(t *testing.T) {
	spin := func() {
		for start := Thread(); Thread()-start < 20*time.Millisecond; {
		}
	}
	var s Sink
	ctx := WithSink(context.Background(), &s)
	done := make(chan struct{})
	go func() { Measure(ctx, spin); close(done) }()
	<-done
	if got := s.Load(); got < 20*time.Millisecond || got > time.Second {
		t.Errorf("sink holds %v after a 20ms spin on another goroutine, want about 20ms", got)
	}
	ran := false
	Measure(context.Background(), func() { ran = true })
	if !ran {
		t.Error("without a sink fn did not run")
	}
}
