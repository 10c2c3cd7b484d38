package act_test

import (
	"path"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/act"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/host"
)

// listedDirtiers is a DirtierSource that names the same threads always
// and never reports a new one.
type listedDirtiers []int

func (d listedDirtiers) Dirtiers(host.Cgroup, time.Duration) ([]int, error) { return d, nil }
func (d listedDirtiers) NotifyDirtier(host.Cgroup, func()) (func(), error) {
	return func() {}, nil
}

// pacedSleeper begins a pacing episode of a sleeping task at 2 ms per
// 10 ms, ended at the benchmark's end.
func pacedSleeper(b *testing.B) host.Paced {
	l := paceable(b)
	c := cgrouptest.New(b, l, 64<<20)
	sleeper := c.Start(b, "sleep", "3600")
	p := &act.Pacer{Layout: l, ProcRoot: "/proc", Journal: cgrouptest.Journal(b, l), Under: host.Cgroup(path.Dir(string(c.Path))),
		Dirtiers: listedDirtiers{sleeper.Process.Pid}}
	e, err := p.Pace(b.Context(), c.Path, 2*time.Millisecond, 10*time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := e.End(); err != nil {
			b.Error(err)
		}
	})
	return e
}

// BenchmarkPacedSet changes a pacing episode's pace as the daemon does
// while a writer is paced: the quota alternates, so each call writes it
// and looks again for the threads the source names (one, paced already).
//
//	go test ./cgroupfs/act -run '^$' -bench PacedSet -benchmem
func BenchmarkPacedSet(b *testing.B) {
	e := pacedSleeper(b)
	quota := [2]time.Duration{2 * time.Millisecond, 3 * time.Millisecond}
	i := 0
	for b.Loop() {
		i++
		if err := e.Set(quota[i%2], 10*time.Millisecond); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPacedCPU reads a pacing episode's CPU time as a step of the
// daemon reads it while a thread is paced (host.Paced.CPU).
//
//	go test ./cgroupfs/act -run '^$' -bench PacedCPU -benchmem
func BenchmarkPacedCPU(b *testing.B) {
	e := pacedSleeper(b)
	for b.Loop() {
		if _, err := e.CPU(); err != nil {
			b.Fatal(err)
		}
	}
}
