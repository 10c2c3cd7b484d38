// Package stall detects the machine stopping as a whole: a virtual
// machine whose host stops every vCPU at once, which no process on it can
// tell from being descheduled. The experiments count such stalls beside
// their victims' figures, and the real-kernel tests of a victim's latency
// take a measurement again when the machine stalled during it.
package stall

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A Probe detects the machine stopping as a whole, which no process
// on it can tell from being descheduled: a virtual machine whose host caps
// its CPU time (its vCPUs and the host's threads that serve its devices
// under one quota) is stopped until the host's period ends once it spends
// the quota, every vCPU at once, and the guest's clocks run on meanwhile.
// A thread pinned to each CPU sleeps Tick at a time at nice −10 and
// notes when a wake-up comes more than Late after its deadline; a
// stall is a time in which every CPU's thread was that late at once. A
// task that keeps one CPU busy delays one thread, not all of them, and a
// nice −10 thread preempts the experiments' workloads within a slice, so
// a stall is the machine's, or every CPU at once running a task of the
// daemon's weight for Late (memcgd's threads run at nice −10 too).
type Probe struct {
	procs int // GOMAXPROCS before the probe raised it
	// base is Now when the probe started, which the probe threads'
	// times count from; stalls what Stop found, on Now's clock.
	base   time.Duration
	stalls []Interval
	stop   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	late   [][]Interval // by CPU
	err    error
}

// Tick is the probe threads' sleep; Late how late a wake-up must be to
// count.
const (
	Tick = time.Millisecond
	Late = 5 * time.Millisecond
)

// Interval is a time range on the monotonic clock, from From to To.
type Interval struct{ From, To time.Duration }

// Now is the time on CLOCK_MONOTONIC, which every process of the machine
// reads alike: another process's times, taken with it, can be set
// against a probe's stalls (Probe.Intervals).
func Now() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) // cannot fail with a valid clock and pointer
	return time.Duration(ts.Nano())
}

// Touches reports whether iv overlaps a stall, or begins within after of
// one's end: a task woken as the machine resumes still waits behind
// what the stall held up.
func Touches(stalls []Interval, iv Interval, after time.Duration) bool {
	for _, s := range stalls {
		if iv.From < s.To+after && s.From < iv.To {
			return true
		}
	}
	return false
}

// Stalls sums a probe's stalls.
type Stalls struct {
	// Count is how many stalls there were, Total and Max their summed
	// and longest time.
	Count      int
	Total, Max time.Duration
}

// Start starts a probe thread on each CPU the process may run
// on.
func Start() (*Probe, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("stall probe: sched_getaffinity: %w", err)
	}
	var cpus []int
	for cpu := range 1024 {
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	// Each probe thread holds a P (watch), so the others get as many
	// as before.
	p := &Probe{procs: runtime.GOMAXPROCS(0), stop: make(chan struct{})}
	runtime.GOMAXPROCS(p.procs + len(cpus))
	p.late = make([][]Interval, len(cpus))
	start, base := time.Now(), Now()
	p.base = base
	for i, cpu := range cpus {
		p.wg.Add(1)
		go p.watch(i, cpu, start)
	}
	return p, nil
}

// watch is CPU cpu's probe thread, the i-th.
func (p *Probe) watch(i, cpu int, start time.Time) {
	defer p.wg.Done()
	runtime.LockOSThread() // the thread exits with the goroutine: its affinity and nice die with it
	var set unix.CPUSet
	set.Set(cpu)
	err := unix.SchedSetaffinity(0, &set)
	if err == nil {
		// PRIO_PROCESS with who 0 is the calling thread on Linux.
		err = unix.Setpriority(unix.PRIO_PROCESS, 0, -10)
	}
	if err != nil {
		p.mu.Lock()
		p.err = fmt.Errorf("stall probe on CPU %d: %w", cpu, err)
		p.mu.Unlock()
		return
	}
	tick := new(unix.Timespec) // on the heap, which the collector does not move
	*tick = unix.NsecToTimespec(int64(Tick))
	var late []Interval
	for {
		select {
		case <-p.stop:
			p.mu.Lock()
			p.late[i] = late
			p.mu.Unlock()
			return
		default:
		}
		due := time.Since(start) + Tick
		// A raw system call keeps the thread's P through the sleep, so
		// that the wake-up's time is taken before anything else of this
		// process can run on the thread: one that leaves the P has to
		// win one back first, which the process's own goroutines could
		// delay. A stop of the world waits for it, up to Tick.
		unix.RawSyscall6(unix.SYS_CLOCK_NANOSLEEP, unix.CLOCK_MONOTONIC, 0, uintptr(unsafe.Pointer(tick)), 0, 0, 0)
		if woke := time.Since(start); woke-due > Late {
			late = append(late, Interval{due, woke})
		}
	}
}

// Stop ends the probe and sums its stalls.
func (p *Probe) Stop() (Stalls, error) {
	close(p.stop)
	p.wg.Wait()
	runtime.GOMAXPROCS(p.procs)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return Stalls{}, p.err
	}
	stalls := Overlap(p.late)
	p.stalls = make([]Interval, len(stalls))
	for i, s := range stalls {
		p.stalls[i] = Interval{p.base + s.From, p.base + s.To}
	}
	return Sum(stalls), nil
}

// Intervals are the stalls Stop found, on Now's clock.
func (p *Probe) Intervals() []Interval {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stalls
}

// Overlap is the times within an interval of every list at once: the
// intersection of the lists' unions. Each list is sorted and its
// intervals do not overlap, as a probe thread's are.
func Overlap(lists [][]Interval) []Interval {
	if len(lists) == 0 {
		return nil
	}
	out := slices.Clone(lists[0])
	for _, l := range lists[1:] {
		var next []Interval
		i, j := 0, 0
		for i < len(out) && j < len(l) {
			from, to := max(out[i].From, l[j].From), min(out[i].To, l[j].To)
			if from < to {
				next = append(next, Interval{from, to})
			}
			if out[i].To < l[j].To {
				i++
			} else {
				j++
			}
		}
		out = next
	}
	return out
}

// Sum counts and sums stalls.
func Sum(stalls []Interval) Stalls {
	var s Stalls
	for _, v := range stalls {
		d := v.To - v.From
		s.Count++
		s.Total += d
		s.Max = max(s.Max, d)
	}
	return s
}
