package safeio

import (
	"context"
	"runtime"
	"syscall"
	"testing"

	"github.com/memcgd/memcgd/internal/cputime"
)

// BenchmarkRunFromAMeasuredOp is a write-out's shape: an op whose CPU time
// the agent measures (cputime.Measure) hands each file's system call to
// Run. "locked" keeps the op's thread locked while it waits for Run's
// goroutine, as the agent did before cputime.Wait; "wait" unlocks it for
// the wait. switches/op counts the process's context switches
// (getrusage), CPU-ns/op its CPU time.
func BenchmarkRunFromAMeasuredOp(b *testing.B) {
	bio, err := NewBoundedIO(IOOptions{})
	if err != nil {
		b.Fatal(err)
	}
	call := func() { syscall.Getppid() } // a system call that cannot block
	for _, bc := range []struct {
		name string
		run  func(ctx context.Context)
	}{
		{"locked", func(ctx context.Context) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if err := bio.Do(ctx, DeviceKey(1), call); err != nil {
				b.Fatal(err)
			}
		}},
		{"wait", func(ctx context.Context) {
			cputime.Measure(ctx, func(ctx context.Context) {
				if err := bio.Do(ctx, DeviceKey(1), call); err != nil {
					b.Fatal(err)
				}
			})
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var sink cputime.Sink
			ctx := cputime.WithSink(context.Background(), &sink)
			before, cpu := rusage(b)
			for b.Loop() {
				bc.run(ctx)
			}
			after, cpu2 := rusage(b)
			b.ReportMetric(float64(after-before)/float64(b.N), "switches/op")
			b.ReportMetric(float64(cpu2-cpu)/float64(b.N), "CPU-ns/op")
		})
	}
}

// rusage returns the process's context switches, voluntary and not, and
// its CPU time in nanoseconds.
func rusage(b *testing.B) (switches, cpuNS int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Nvcsw + ru.Nivcsw, ru.Utime.Nano() + ru.Stime.Nano()
}
