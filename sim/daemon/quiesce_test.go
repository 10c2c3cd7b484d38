package daemon

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// A traceback as runtime.Stack(all) prints it (Go 1.21 and later).
const stacks = `goroutine 7 [running]:
main.driver()
	/x.go:1 +0x1

goroutine 8 [chan receive]:
main.spawner()
	/x.go:2 +0x1
created by main.driver in goroutine 7
	/x.go:3 +0x1

goroutine 9 [select, 2 minutes]:
agent.(*Agent).loop()
	/a.go:1 +0x1
created by main.spawner.func1 in goroutine 8
	/x.go:4 +0x1

goroutine 10 [%s]:
agent.(*Agent).Run.func1()
	/a.go:2 +0x1
created by agent.(*Agent).Run in goroutine 9
	/a.go:3 +0x1

goroutine 11 [runnable]:
other.work()
	/o.go:1 +0x1
created by main.driver in goroutine 7
	/o.go:2 +0x1
`

// The agent is quiescent when every goroutine below the spawner waits for
// another: a runnable or running one, or one in a system call, is work in
// progress; goroutines outside the spawner's tree do not count. So is one
// waiting for the runtime alone: "semacquire" is the runtime's semaphores
// (a GC cycle starting, the world stopping), released by the runtime.
func TestAllParked(t *testing.T) {
	for _, tc := range []struct {
		state  string
		parked bool
	}{
		{"chan receive", true},
		{"chan send", true},
		{"select", true},
		{"select (no cases)", true},
		{"sync.Mutex.Lock", true},
		{"sync.RWMutex.RLock", true},
		{"sync.WaitGroup.Wait", true},
		{"sync.Cond.Wait", true},
		{"chan receive (nil chan)", true},
		{"semacquire", false},
		{"semacquire, 2 minutes", false},
		{"wait for GC cycle", false},
		{"preempted", false},
		{"IO wait", false},
		{"runnable", false},
		{"running", false},
		{"syscall", false},
		{"sleep", false},
		{"GC assist wait", false},
		{"selectgo-like", false},
	} {
		gs := parseStacks([]byte(strings.Replace(stacks, "%s", tc.state, 1)))
		if len(gs) != 5 {
			t.Fatalf("%s: parsed %d goroutines, want 5: %+v", tc.state, len(gs), gs)
		}
		if gs[3].id != 10 || gs[3].parent != 9 {
			t.Fatalf("%s: goroutine %+v, want id 10, parent 9", tc.state, gs[3])
		}
		if got := allParked(gs, 8); got != tc.parked {
			t.Errorf("worker %q: allParked = %v, want %v", tc.state, got, tc.parked)
		}
	}
}

func TestGoroutineID(t *testing.T) {
	ch := make(chan int64)
	go func() { ch <- goroutineID() }()
	if a, b := goroutineID(), <-ch; a <= 0 || b <= 0 || a == b {
		t.Errorf("goroutine ids %d and %d: want two distinct positive ids", a, b)
	}
}

// A busy goroutine the agent's code started counts though its parent has
// returned: its "created by" line names a goroutine the snapshot no
// longer holds.
func TestAllParkedCountsAnOrphanedAgentGoroutine(t *testing.T) {
	const orphan = `goroutine 8 [chan receive]:
main.spawner()
	/x.go:2 +0x1
created by main.driver in goroutine 7
	/x.go:3 +0x1

goroutine 12 [%s]:
github.com/memcgd/memcgd/agent.(*Agent).actOrHandOff.func1()
	/a.go:9 +0x1
created by github.com/memcgd/memcgd/agent.(*Agent).actOrHandOff in goroutine 99
	/a.go:8 +0x1
`
	for _, tc := range []struct {
		state  string
		parked bool
	}{{"runnable", false}, {"syscall", false}, {"chan receive", true}} {
		gs := parseStacks([]byte(strings.Replace(orphan, "%s", tc.state, 1)))
		if len(gs) != 2 || gs[1].creator != "github.com/memcgd/memcgd/agent.(*Agent).actOrHandOff" {
			t.Fatalf("parsed %+v, want 2 goroutines, the second created by the agent", gs)
		}
		if got := allParked(gs, 8); got != tc.parked {
			t.Errorf("orphaned agent goroutine %q: allParked = %v, want %v", tc.state, got, tc.parked)
		}
	}
}

// A worker whose allocation started a GC cycle while the driver's snapshot
// held the world stopped: the snapshot that let the clock move under it in
// a failing run of TestAgentHoldsDirtyBytes (the worker went on to arm
// its HoldFor timer after the drain, so it was never armed, and the cgroup
// stayed frozen to the end of the run).
func TestAllParkedWorkerStartingAGC(t *testing.T) {
	const snap = `goroutine 35661 [running]:
github.com/memcgd/memcgd/sim/daemon.(*Agent).waitParked(0x37e494fc8180)
	/w/sim/daemon/agent.go:218 +0x77
github.com/memcgd/memcgd/sim/daemon.(*Agent).drain(0x37e494fc8180)
	/w/sim/daemon/agent.go:188 +0x165

goroutine 35662 [chan receive]:
github.com/memcgd/memcgd/sim/daemon.(*Agent).Start.func1()
	/w/sim/daemon/agent.go:129 +0x77
created by github.com/memcgd/memcgd/sim/daemon.(*Agent).Start in goroutine 35661
	/w/sim/daemon/agent.go:127 +0x4b9

goroutine 35664 [semacquire]:
github.com/memcgd/memcgd/agent.(*Agent).carry(0x37e494f2c160, {0x61af20, 0x37e494f42460}, 0x37e494fbf188, {0x0, 0x0, 0x0, 0x0, 0x0, 0x2, ...})
	/w/agent/throttle.go:129 +0x3a5
github.com/memcgd/memcgd/agent.(*Agent).step(0x37e494f2c160, {0x61af20, 0x37e494f42460}, 0x37e494fbf188)
	/w/agent/agent.go:857 +0x9b2
github.com/memcgd/memcgd/agent.(*Agent).Run.func1()
	/w/agent/agent.go:353 +0xd6
created by github.com/memcgd/memcgd/agent.(*Agent).Run in goroutine 35663
	/w/agent/agent.go:350 +0x25c

goroutine 35663 [select]:
github.com/memcgd/memcgd/agent.(*Agent).loop(0x37e494f2c160, {0x61af20, 0x37e494f42460})
	/w/agent/agent.go:482 +0x73f
github.com/memcgd/memcgd/agent.(*Agent).Run(0x37e494f2c160, {0x61af20, 0x37e494f42460})
	/w/agent/agent.go:361 +0x2fa
github.com/memcgd/memcgd/sim/daemon.(*Agent).Start.func2()
	/w/sim/daemon/agent.go:138 +0x28
created by github.com/memcgd/memcgd/sim/daemon.(*Agent).Start.func1 in goroutine 35662
	/w/sim/daemon/agent.go:130 +0x68
`
	gs := parseStacks([]byte(snap))
	if len(gs) != 4 || gs[2].id != 35664 || gs[2].parent != 35663 {
		t.Fatalf("parsed %+v, want 4 goroutines, the third 35664 started by 35663", gs)
	}
	if allParked(gs, 35662) {
		t.Errorf("a worker in semacquire (starting a GC cycle) taken for parked")
	}
}

// Live: a goroutine that only ever waits for the runtime is never taken
// for parked, however the snapshots fall. Each of these waits in
// "semacquire" when it meets the snapshot's own stop of the world: with two
// CPUs, a GC cycle in a few snapshots of 2,000, a stop of the world in most.
// With one CPU the goroutine never runs beside the snapshot, and the check
// passes trivially.
func TestSnapshotRuntimeWaitsAreBusy(t *testing.T) {
	for _, tc := range []struct {
		name string
		wait func()
	}{
		{"a GC cycle", runtime.GC},
		{"a stop of the world", func() {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids, stop, done := make(chan int64), make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				ids <- goroutineID()
				for {
					select {
					case <-stop:
						return
					default:
						tc.wait()
					}
				}
			}()
			root := <-ids
			defer func() { close(stop); <-done }()
			buf := make([]byte, 1<<20)
			waiting := fmt.Appendf(nil, "goroutine %d [semacquire", root)
			n, sema := 0, 0
			for start := time.Now(); time.Since(start) < 300*time.Millisecond; n++ {
				b := buf[:runtime.Stack(buf, true)]
				if bytes.Contains(b, waiting) {
					sema++
				}
				if allParked(parseStacks(b), root) {
					t.Fatalf("snapshot %d took a goroutine waiting for %s for parked:\n%s", n, tc.name, b)
				}
			}
			t.Logf("%d snapshots, %d with the goroutine in semacquire", n, sema)
		})
	}
}

// An agent goroutine acting on the simulation between drains is recorded
// for Stop, the first one only; while the driver has woken the agent it
// is not.
func TestTouchBetweenDrains(t *testing.T) {
	for _, tc := range []struct {
		name  string
		awake []bool // per touch
		want  string // the stray recorded, "" for none
	}{
		{"during drains", []bool{true, true}, ""},
		{"between drains", []bool{false}, "an agent goroutine's call 0 at 2ms"},
		{"the first kept", []bool{true, false, false}, "an agent goroutine's call 1 at 2ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &Agent{}
			d.now.Store(int64(2 * time.Millisecond))
			for i, awake := range tc.awake {
				d.awake.Store(awake)
				d.touch(fmt.Sprintf("call %d", i))
			}
			got := ""
			if s := d.stray.Load(); s != nil {
				got = *s
			}
			if got != tc.want {
				t.Errorf("stray %q, want %q", got, tc.want)
			}
		})
	}
}
