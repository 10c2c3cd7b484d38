package daemon

import (
	"bytes"
	"runtime"
	"strconv"
	"strings"
)

// The agent is concurrent (its loop, a worker, write-outs handed off to
// goroutines of their own, timer callbacks), and the simulated clock may
// only move once every one of its goroutines waits for something the
// simulation delivers: a host call, a timer, a watcher report. Go has no
// API for "every goroutine of this group is blocked" outside
// testing/synctest (which needs a *testing.T), so the driver reads the
// goroutines' states from runtime.Stack: one stop-the-world snapshot in
// which every goroutine descending from the driver's spawner is parked on
// a channel, a select or a lock. A goroutine made ready by a send is
// runnable in that snapshot, never parked, so a snapshot cannot miss work
// in flight, as long as no state counted as parked can end by the
// runtime's doing alone (parkedStates). Should one ever do, the Agent
// reports it (Agent.Stop): an agent goroutine calling the host or setting
// a timer while the clock may move.

// goroutineInfo is one goroutine of a runtime.Stack(all) snapshot.
type goroutineInfo struct {
	id, parent int64
	parked     bool
	creator    string // the function whose go statement started it
}

// parkedStates are the wait reasons of a goroutine that waits for another
// goroutine (runtime2.go, waitReasonStrings): it cannot move until one
// does. Any other state (running, runnable, syscall, sleep, GC assist) is
// work in progress.
//
// "semacquire" is not one of them. With the Go this module requires, every
// wait of package sync has a reason of its own (sync.WaitGroup.Wait too),
// and "semacquire" is left to the runtime's own semaphores, which the
// runtime releases, not another goroutine: the world's (worldsema) and the
// GC's (gcsema, work.startSema, in gcStart). The snapshot itself holds
// worldsema while it stops the world, so a goroutine whose allocation
// starts a GC cycle just then parks in "semacquire" and runs on as soon as
// the snapshot ends. Taken for parked, a worker between a freeze and the
// AfterFunc of its HoldFor ran on while the clock moved; its timer was
// never armed, and the writer was held frozen to the end of the run (3.47 s
// against MaxPause 200 ms in one CI run; TestSnapshotRuntimeWaitsAreBusy).
var parkedStates = [][]byte{
	[]byte("select"), []byte("chan receive"), []byte("chan send"),
	[]byte("sync.Mutex.Lock"), []byte("sync.RWMutex.Lock"), []byte("sync.RWMutex.RLock"),
	[]byte("sync.WaitGroup.Wait"), []byte("sync.Cond.Wait"),
}

// snapshot returns every goroutine's id, parent and whether it is parked.
func snapshot(buf *[]byte) []goroutineInfo {
	for {
		n := runtime.Stack(*buf, true)
		if n < len(*buf) {
			return parseStacks((*buf)[:n])
		}
		*buf = make([]byte, 2*len(*buf))
	}
}

// parseStacks parses runtime.Stack's traceback format: blocks separated
// by blank lines, each "goroutine ID [STATE, ...]:" and, for one started
// by a go statement, "created by FUNC in goroutine PARENT".
func parseStacks(b []byte) []goroutineInfo {
	var out []goroutineInfo
	for len(b) > 0 {
		blk := b
		if i := bytes.Index(b, []byte("\n\n")); i >= 0 {
			blk, b = b[:i], b[i+2:]
		} else {
			b = nil
		}
		rest, ok := bytes.CutPrefix(blk, []byte("goroutine "))
		if !ok {
			continue
		}
		sp := bytes.IndexByte(rest, ' ')
		if sp < 0 {
			continue
		}
		id, err := strconv.ParseInt(string(rest[:sp]), 10, 64)
		if err != nil {
			continue
		}
		g := goroutineInfo{id: id, parent: -1}
		if st, ok := bytes.CutPrefix(rest[sp+1:], []byte("[")); ok {
			for _, p := range parkedStates {
				if bytes.HasPrefix(st, p) && len(st) > len(p) && (st[len(p)] == ']' || st[len(p)] == ',' || st[len(p)] == ' ') {
					g.parked = true
					break
				}
			}
		}
		if i := bytes.LastIndex(blk, []byte(" in goroutine ")); i >= 0 {
			tail := blk[i+len(" in goroutine "):]
			if j := bytes.IndexByte(tail, '\n'); j >= 0 {
				tail = tail[:j]
			}
			if p, err := strconv.ParseInt(string(tail), 10, 64); err == nil {
				g.parent = p
			}
			if j := bytes.LastIndex(blk[:i], []byte("created by ")); j >= 0 {
				g.creator = string(blk[j+len("created by ") : i])
			}
		}
		out = append(out, g)
	}
	return out
}

// agentCode prefixes the functions whose go statements start the
// agent's goroutines.
const agentCode = "github.com/memcgd/memcgd/agent."

// allParked reports whether every goroutine descending from root (root
// included), or started by the agent's own code, is parked. The second
// rule closes a hole in the first: a goroutine started by one that has
// since returned names a parent the snapshot no longer holds (a timer
// callback's write-out, for example), and a busy agent goroutine outside
// the tree would let the clock move under it. One CI run (30 Nov 2026)
// gave the real agent in sim/run 6.25 × its limit with 3,186 steps,
// against 0.94 × and 5,162 steps in every other run (6 here): this hole
// is the one found that can explain it.
func allParked(gs []goroutineInfo, root int64) bool {
	in := map[int64]bool{root: true}
	for _, g := range gs {
		if strings.HasPrefix(g.creator, agentCode) {
			in[g.id] = true
		}
	}
	for grew := true; grew; {
		grew = false
		for _, g := range gs {
			if !in[g.id] && in[g.parent] {
				in[g.id], grew = true, true
			}
		}
	}
	for _, g := range gs {
		if in[g.id] && !g.parked {
			return false
		}
	}
	return true
}

// goroutineID is the calling goroutine's id.
func goroutineID() int64 {
	var b [64]byte
	n := runtime.Stack(b[:], false)
	rest, _ := bytes.CutPrefix(b[:n], []byte("goroutine "))
	if i := bytes.IndexByte(rest, ' '); i >= 0 {
		rest = rest[:i]
	}
	id, _ := strconv.ParseInt(string(rest), 10, 64)
	return id
}
