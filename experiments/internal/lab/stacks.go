package lab

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Task names a thread whose kernel stack a StackSampler reads.
type Task struct {
	// Name labels it in reports.
	Name string
	// Pid and Tid are its process and thread ids (equal for a kernel
	// thread or a process's main thread).
	Pid, Tid int
}

// Stacks are one task's samples: where in the kernel it was each time it
// was looked at. A sampled stack says where a blocked task waits; a
// runnable task's (state R) says little, since it is on a CPU or about to
// be.
type Stacks struct {
	Task Task
	// N is the number of samples.
	N int
	// ByStack counts the samples by StackKey.
	ByStack map[string]int
	// Gone says the task exited before the sampling ended.
	Gone bool
}

// StackKey is the key of a sample in Stacks.ByStack: the task's state
// letter (/proc/PID/stat's third field: R running or runnable, S
// sleeping, D uninterruptible, ...), a space, then the functions of its
// kernel stack, innermost first, joined by " < ", without offsets.
func StackKey(state byte, frames []string) string {
	return string(state) + " " + strings.Join(frames, " < ")
}

// SplitStackKey splits a StackKey into the state and the frames.
func SplitStackKey(key string) (state byte, frames []string) {
	if key == "" {
		return 0, nil
	}
	state = key[0]
	if rest := strings.TrimPrefix(key[1:], " "); rest != "" {
		frames = strings.Split(rest, " < ")
	}
	return state, frames
}

// Top is the n stacks with the most samples, most first (ties by key),
// with their counts.
func (s Stacks) Top(n int) (keys []string, counts []int) {
	for k := range s.ByStack {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if s.ByStack[keys[i]] != s.ByStack[keys[j]] {
			return s.ByStack[keys[i]] > s.ByStack[keys[j]]
		}
		return keys[i] < keys[j]
	})
	keys = keys[:min(n, len(keys))]
	for _, k := range keys {
		counts = append(counts, s.ByStack[k])
	}
	return keys, counts
}

// StackSampler reads the state and kernel stack of tasks at an interval
// (/proc/PID/task/TID/stat and stack, which need root), on a goroutine
// locked to its thread: a way to see where a task blocks that needs no
// tracer. A task's stack is read while it may run, so a sample can mix
// two moments; over thousands of samples that washes out.
type StackSampler struct {
	stop, done chan struct{}
	out        []Stacks
	err        error
}

// SampleStacks starts sampling tasks every interval until Stop.
func (l *Lab) SampleStacks(every time.Duration, tasks ...Task) (*StackSampler, error) {
	type files struct{ stat, stack *os.File }
	open := make([]files, len(tasks))
	closeAll := func() {
		for _, f := range open {
			if f.stat != nil {
				f.stat.Close()
			}
			if f.stack != nil {
				f.stack.Close()
			}
		}
	}
	for i, t := range tasks {
		dir := fmt.Sprintf("/proc/%d/task/%d", t.Pid, t.Tid)
		var err error
		if open[i].stat, err = os.Open(dir + "/stat"); err == nil {
			open[i].stack, err = os.Open(dir + "/stack")
		}
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("sample the stack of %s: %w", t.Name, err)
		}
	}
	s := &StackSampler{stop: make(chan struct{}), done: make(chan struct{}), out: make([]Stacks, len(tasks))}
	for i, t := range tasks {
		s.out[i] = Stacks{Task: t, ByStack: map[string]int{}}
	}
	go func() {
		defer close(s.done)
		defer closeAll()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		statBuf, stackBuf := make([]byte, 4096), make([]byte, 16<<10)
		var frames []string
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			for i := range tasks {
				o := &s.out[i]
				if o.Gone {
					continue
				}
				state, err := readState(open[i].stat, statBuf)
				if err == nil {
					frames, err = readStack(open[i].stack, stackBuf, frames[:0])
				}
				if isGone(err) {
					o.Gone = true
					continue
				}
				if err != nil {
					s.err = fmt.Errorf("sample the stack of %s: %w", tasks[i].Name, err)
					return
				}
				o.N++
				o.ByStack[StackKey(state, frames)]++
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s, nil
}

// Stop ends the sampling and returns each task's samples, in the order
// given, or the error that ended it early.
func (s *StackSampler) Stop() ([]Stacks, error) {
	close(s.stop)
	<-s.done
	return s.out, s.err
}

// isGone says whether a read failed because the task exited.
func isGone(err error) bool {
	return errors.Is(err, syscall.ESRCH) || errors.Is(err, os.ErrNotExist)
}

// readState reads the state letter from an open /proc/PID/stat: the field
// after the command name, which is in parentheses and may hold spaces and
// parentheses itself (fs/proc/array.c do_task_stat).
func readState(f *os.File, buf []byte) (byte, error) {
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	return parseStatState(buf[:n])
}

func parseStatState(b []byte) (byte, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, fmt.Errorf("stat %q: no state after the command name", b)
	}
	return b[i+2], nil
}

// readStack reads the functions of an open /proc/PID/stack, appended to
// frames.
func readStack(f *os.File, buf []byte, frames []string) ([]string, error) {
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return frames, err
	}
	return parseStack(buf[:n], frames), nil
}

// parseStack takes the function names of a kernel stack as
// /proc/PID/stack prints it (fs/proc/base.c proc_pid_stack), one frame a
// line: "[<0>] folio_wait_bit_common+0x13f/0x340".
func parseStack(b []byte, frames []string) []string {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if i := bytes.IndexByte(line, ' '); i >= 0 {
			line = line[i+1:]
		}
		if i := bytes.IndexByte(line, '+'); i >= 0 {
			line = line[:i]
		}
		if len(line) > 0 {
			frames = append(frames, string(line))
		}
	}
	return frames
}
