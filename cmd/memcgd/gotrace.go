package main

import (
	"fmt"
	"os"
	"runtime/trace"
)

// startGoTrace writes the Go runtime's execution trace to path (a new
// file, root-only: never one already there) until the returned function
// is called: which goroutine ran on which thread when, and what each
// waited for, to find where the daemon's reaction time goes (`go tool trace`, or its -pprof=sched
// profile of time spent runnable but not running).
func startGoTrace(path string) (stop func(), err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--go-trace: %w", err)
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--go-trace %s: %w", path, err)
	}
	return func() {
		trace.Stop()
		f.Close()
	}, nil
}
