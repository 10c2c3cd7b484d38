package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The modes of experiments/victim: workloads that run beside a noisy one
// and measure what it does to them.
const (
	// VictimSleep sleeps an interval in a loop and measures how late each
	// wake-up is.
	VictimSleep = "sleep"
	// VictimSync writes a block at the end of a file and fdatasyncs it in
	// a loop, as a database's write-ahead log does.
	VictimSync = "sync"
	// VictimWrite writes chunks into the page cache at a paced rate, as a
	// modest buffered writer does.
	VictimWrite = "write"
)

// Latencies are percentiles of a victim's per-loop latencies (nearest
// rank, Series.Percentile).
type Latencies struct {
	P50  time.Duration `json:"p50_ns"`
	P99  time.Duration `json:"p99_ns"`
	P999 time.Duration `json:"p999_ns"`
	Max  time.Duration `json:"max_ns"`
}

// LatenciesOf summarises a series of nanoseconds.
func LatenciesOf(s Series) Latencies {
	return Latencies{P50: time.Duration(s.Percentile(50)), P99: time.Duration(s.Percentile(99)),
		P999: time.Duration(s.Percentile(99.9)), Max: time.Duration(s.Percentile(100))}
}

// VictimResult is what experiments/victim prints when it stops.
type VictimResult struct {
	Mode string `json:"mode"`
	// Ops is the loops completed: sleeps, write+fdatasync pairs, or
	// writes.
	Ops uint64 `json:"ops"`
	// Wall is the time from its ready line to the end of its input.
	Wall time.Duration `json:"wall_ns"`
	// Bytes is what it wrote (sync, write).
	Bytes uint64 `json:"bytes"`
	// Latency is, per loop: in sleep, the wake-up's lateness past the
	// interval; in sync, a write+fdatasync; in write, a write(2).
	Latency Latencies `json:"latency"`
	// Slow is the loops whose latency exceeded the slow threshold
	// (-slow).
	Slow uint64 `json:"slow"`
	// WriteTime and SyncTime are the time inside write(2) and
	// fdatasync(2), summed.
	WriteTime time.Duration `json:"write_ns"`
	SyncTime  time.Duration `json:"sync_ns"`
	// Sched is the loop thread's scheduler statistics over Wall: its
	// time waiting for a CPU is Sched.Wait.
	Sched SchedStat `json:"sched"`
}

// Rate is Ops a second.
func (r VictimResult) Rate() float64 { return float64(r.Ops) / r.Wall.Seconds() }

// Throughput is Bytes a second.
func (r VictimResult) Throughput() float64 { return float64(r.Bytes) / r.Wall.Seconds() }

// OffCPU is the loop thread's time neither on a CPU nor waiting for one:
// asleep or blocked.
func (r VictimResult) OffCPU() time.Duration { return r.Wall - r.Sched.Run - r.Sched.Wait }

// Victim describes one run of experiments/victim.
type Victim struct {
	// Bin is the victim binary (Bench.Victim).
	Bin string
	// Mode is VictimSleep, VictimSync or VictimWrite.
	Mode string
	// File is the file it writes (sync, write).
	File string
	// Interval is the sleep (sleep).
	Interval time.Duration
	// Block is the bytes written before each fdatasync (sync); Chunk and
	// Rate the write(2) size and the pace (write).
	Block, Chunk, Rate uint64
	// Slow is the latency above which a loop counts as slow.
	Slow time.Duration
}

// RunningVictim is a victim started in a cgroup.
type RunningVictim struct {
	*Background
	// Tid is the thread that runs its loop.
	Tid int
}

// Start starts the victim inside c and returns once its loop runs.
func (v Victim) Start(ctx context.Context, l *Lab, c *Cgroup) (*RunningVictim, error) {
	args := []string{"-mode", v.Mode}
	add := func(name, value string) { args = append(args, "-"+name, value) }
	if v.File != "" {
		add("file", v.File)
	}
	if v.Interval != 0 {
		add("interval", v.Interval.String())
	}
	for _, f := range []struct {
		name string
		v    uint64
	}{{"block", v.Block}, {"chunk", v.Chunk}, {"rate", v.Rate}} {
		if f.v != 0 {
			add(f.name, strconv.FormatUint(f.v, 10))
		}
	}
	if v.Slow != 0 {
		add("slow", v.Slow.String())
	}
	p, err := l.Start(ctx, c, v.Bin, args...)
	if err != nil {
		return nil, fmt.Errorf("victim %s: %w", v.Mode, err)
	}
	tid, ok := strings.CutPrefix(p.Ready, "ready ")
	n, err := strconv.Atoi(tid)
	if !ok || err != nil {
		_, _, serr := p.Stop()
		return nil, fmt.Errorf("victim %s in %s: ready line %q, want \"ready TID\" (%v)", v.Mode, c.Path, p.Ready, serr)
	}
	return &RunningVictim{Background: p, Tid: n}, nil
}

// Task is the victim's loop thread, for SampleStacks.
func (r *RunningVictim) Task(name string) Task { return Task{Name: name, Pid: r.Pid, Tid: r.Tid} }

// Stop ends the victim and returns its report.
func (r *RunningVictim) Stop() (VictimResult, error) {
	out, _, err := r.Background.Stop()
	if err != nil {
		return VictimResult{}, err
	}
	var res VictimResult
	if err := json.Unmarshal(out, &res); err != nil {
		return VictimResult{}, fmt.Errorf("victim: read its report %q: %w", out, err)
	}
	return res, nil
}
