package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestCheckSchedSlice(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string // "" for valid, else a part of the error
	}{
		{0, ""},
		{100 * time.Microsecond, ""},
		{time.Millisecond, ""},
		{100 * time.Millisecond, ""},
		{99 * time.Microsecond, "--sched-slice: invalid value 99µs: allowed 0 (the kernel's default) or 100µs to 100ms"},
		{101 * time.Millisecond, "invalid value 101ms"},
		{-time.Millisecond, "invalid value -1ms"},
	} {
		err := checkSchedSlice(tc.d)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("checkSchedSlice(%s) = %v, want nil", tc.d, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("checkSchedSlice(%s) = %v, want an error containing %q", tc.d, err, tc.want)
		}
	}
}

// sliceChildEnv makes this test binary the child of
// TestSchedSliceReachesEveryThread: the slice in nanoseconds.
const sliceChildEnv = "MEMCGD_TEST_SLICE_CHILD"

// childNice is the nice value the child gives its threads before the
// slice: setting the slice must keep it.
const childNice = 3

// TestSchedSliceReachesEveryThread runs setSchedSlice in a child process
// (this test binary again: the slice would otherwise stay on the test's
// own threads), whose threads are at nice childNice, and which then makes
// new threads. On a kernel with custom slices every thread, old and new,
// must carry the slice and keep its nice; on one without, setSchedSlice
// must say so with errNoCustomSlice.
func TestSchedSliceReachesEveryThread(t *testing.T) {
	if v := os.Getenv(sliceChildEnv); v != "" {
		sliceChild(v)
		return
	}
	const slice = 300 * time.Microsecond
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^TestSchedSliceReachesEveryThread$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", sliceChildEnv, slice))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	release, err := kernelRelease()
	if err != nil {
		t.Fatal(err)
	}
	var threads int
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "unsupported":
			if customSlices(release) {
				t.Fatalf("setSchedSlice: %s, on a kernel with custom slices (%s)", f[1], release)
			}
			t.Logf("kernel %s keeps no custom slice; setSchedSlice says so", release)
			return
		case len(f) == 4 && f[0] == "thread":
			threads++
			runtime, _ := strconv.ParseUint(f[2], 10, 64)
			nice, _ := strconv.Atoi(f[3])
			if runtime != uint64(slice) || nice != childNice {
				t.Errorf("thread %s: slice %v, nice %d; want %v, nice %d", f[1], time.Duration(runtime), nice, slice, childNice)
			}
		}
	}
	if !customSlices(release) {
		t.Fatalf("kernel %s has no custom slices, yet setSchedSlice did not say so:\n%s", release, out)
	}
	if threads < 5 {
		t.Fatalf("child listed %d threads, want at least the 4 it made and its first:\n%s", threads, out)
	}
	t.Logf("%d threads, all at slice %v and nice %d", threads, slice, childNice)
}

// sliceChild is the child's side: nice every thread, set the slice, make
// threads, and print each thread's slice and nice.
func sliceChild(v string) {
	ns, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		fmt.Println("bad", v)
		os.Exit(2)
	}
	ents, _ := os.ReadDir("/proc/self/task")
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		unix.Setpriority(unix.PRIO_PROCESS, tid, childNice)
	}
	if _, err := setSchedSlice(time.Duration(ns)); err != nil {
		if errors.Is(err, errNoCustomSlice) {
			fmt.Println("unsupported", "errNoCustomSlice")
			os.Exit(0)
		}
		fmt.Println("error", err)
		os.Exit(1)
	}
	// Goroutines locked to their threads while others are locked make
	// the runtime start new threads, cloned from threads already set.
	started, hold := make(chan struct{}), make(chan struct{})
	for range 4 {
		go func() {
			runtime.LockOSThread()
			started <- struct{}{}
			<-hold
		}()
	}
	for range 4 {
		<-started
	}
	ents, _ = os.ReadDir("/proc/self/task")
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		a, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue // exited
		}
		fmt.Println("thread", tid, a.Runtime, a.Nice)
	}
	close(hold)
	os.Exit(0)
}

// customSlices reports whether a kernel of this release keeps custom
// slices for SCHED_OTHER tasks: 6.12 and later.
func customSlices(release string) bool {
	major, minor, _ := kernelVersion(release)
	return major > 6 || major == 6 && minor >= 12
}
