package daemon

import (
	"strings"
	"testing"
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
// progress; goroutines outside the spawner's tree do not count.
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
