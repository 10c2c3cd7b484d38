package lab

import (
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParseStatStateSkipsTheCommandName(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want byte
	}{
		{"8570 (kworker/u8:3-writeback) I 2 0 0", 'I'},
		{"123 (a (b) c) D 1 123", 'D'}, // a name with parentheses and spaces
		{"7 (victim) R 1", 'R'},
	} {
		if got, err := parseStatState([]byte(tc.in)); err != nil || got != tc.want {
			t.Errorf("parseStatState(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := parseStatState([]byte("123 (cut")); err == nil {
		t.Error("parseStatState of a cut line: no error")
	}
}

func TestParseStackKeepsTheFunctionNames(t *testing.T) {
	in := "[<0>] folio_wait_bit_common+0x13f/0x340\n[<0>] __filemap_fdatawait_range+0x8e/0xf0\n" +
		"[<0>] ext4_fsync_nojournal.constprop.0+0x5c/0xd0\n[<0>] entry_SYSCALL_64_after_hwframe+0x76/0x7e\n"
	want := []string{"folio_wait_bit_common", "__filemap_fdatawait_range", "ext4_fsync_nojournal.constprop.0", "entry_SYSCALL_64_after_hwframe"}
	if got := parseStack([]byte(in), nil); !slices.Equal(got, want) {
		t.Errorf("parseStack = %q, want %q", got, want)
	}
	if got := parseStack(nil, nil); len(got) != 0 {
		t.Errorf("parseStack of an empty stack = %q, want none", got)
	}
}

func TestStackKeyRoundTrips(t *testing.T) {
	for _, frames := range [][]string{{"a", "b_c"}, nil} {
		state, got := SplitStackKey(StackKey('D', frames))
		if state != 'D' || !slices.Equal(got, frames) {
			t.Errorf("SplitStackKey(StackKey('D', %q)) = %q, %q", frames, state, got)
		}
	}
}

func TestTopOrdersByCountThenKey(t *testing.T) {
	s := Stacks{N: 10, ByStack: map[string]int{"S b": 3, "D a": 5, "S a": 3, "R": 1}}
	keys, counts := s.Top(3)
	if want := []string{"D a", "S a", "S b"}; !slices.Equal(keys, want) || !slices.Equal(counts, []int{5, 3, 3}) {
		t.Errorf("Top(3) = %q %v, want %q [5 3 3]", keys, counts, want)
	}
	if keys, _ := s.Top(10); len(keys) != 4 {
		t.Errorf("Top(10) of 4 stacks = %q, want all 4", keys)
	}
}

// A thread of this process that sleeps in clock_nanosleep is sampled
// there. Reading another task's kernel stack needs root.
func TestSampleStacksSeesASleepingThread(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("reading /proc/PID/task/TID/stack needs root")
	}
	tid := make(chan int)
	stop := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		tid <- unix.Gettid()
		ts := unix.NsecToTimespec(int64(time.Millisecond))
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = unix.ClockNanosleep(unix.CLOCK_MONOTONIC, 0, &ts, nil)
		}
	}()
	task := Task{Name: "sleeper", Pid: os.Getpid(), Tid: <-tid}
	l := &Lab{}
	s, err := l.SampleStacks(time.Millisecond, task)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	got, err := s.Stop()
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Task != task || got[0].N == 0 {
		t.Fatalf("Stop() = %+v, want the samples of %+v", got, task)
	}
	asleep := 0
	for k, n := range got[0].ByStack {
		if state, frames := SplitStackKey(k); state == 'S' && slices.ContainsFunc(frames, func(f string) bool {
			return strings.Contains(f, "nanosleep")
		}) {
			asleep += n
		}
	}
	if asleep == 0 {
		t.Errorf("no sample of %d asleep in a nanosleep function: %v", got[0].N, got[0].ByStack)
	}
}
