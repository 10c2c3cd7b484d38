package control

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/memcgd/memcgd/host"
	"github.com/memcgd/memcgd/memcg"
	"github.com/memcgd/memcgd/state"
)

// manyBackend answers Status with n cgroups; the rest is not used.
type manyBackend struct{ sts []state.Status }

func newManyBackend(n int) *manyBackend {
	b := &manyBackend{sts: make([]state.Status, n)}
	for i := range b.sts {
		b.sts[i] = state.Status{
			Cgroup:    host.Cgroup(fmt.Sprintf("/kubepods/burstable/pod%05d/container", i)),
			Observed:  time.Unix(0, 0),
			Stat:      memcg.Stat{Usage: uint64(i) << 20, Limit: 64 << 20, Max: 64 << 20, High: memcg.NoLimit, File: 1 << 20},
			Effective: memcg.Effective{Knobs: memcg.DefaultKnobs()},
			Counters:  state.Counters{WriteOuts: uint64(i)},
			Managed:   true,
		}
	}
	return b
}

func (b *manyBackend) Set(host.Cgroup, map[string]string) error { return errors.New("not here") }
func (b *manyBackend) Get(host.Cgroup) (GetResult, error)       { return GetResult{}, errors.New("not here") }
func (b *manyBackend) Reset(host.Cgroup) error                  { return errors.New("not here") }
func (b *manyBackend) Status(cg host.Cgroup) ([]state.Status, error) {
	if cg != "" {
		return nil, fmt.Errorf("cgroup %s is not managed by memcgd", cg)
	}
	return append([]state.Status(nil), b.sts...), nil // the agent hands out a copy
}

// Defect 14: the answer to a stat of every cgroup is streamed, one
// response per cgroup: every report arrives, in order, on one connection
// that then still answers.
func TestStatStreamsEveryCgroup(t *testing.T) {
	const n = 3000
	b := newManyBackend(n)
	path, _ := serve(t, b)
	c := dial(t, path)
	for round := range 2 {
		i := 0
		err := c.StatEach(context.Background(), "", func(r Report) error {
			if r.Cgroup != b.sts[i].Cgroup {
				return fmt.Errorf("report %d is %s, want %s", i, r.Cgroup, b.sts[i].Cgroup)
			}
			if got, want := r.Fields, b.sts[i].Fields(); fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("report %d fields %v, want %v", i, got, want)
			}
			i++
			return nil
		})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if i != n {
			t.Fatalf("round %d: %d reports, want %d", round, i, n)
		}
	}
	// A caller that stops early gets its own error back.
	stop := errors.New("enough")
	if err := c.StatEach(context.Background(), "", func(Report) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("Stat stopped by its callback: %v, want %v", err, stop)
	}
}

// No response line holds more than one cgroup: the largest is far below
// what a whole answer was (megabytes at 10,000 cgroups).
func TestStatResponsesAreSmall(t *testing.T) {
	b := newManyBackend(100)
	var longest int
	reply := func(r response) bool {
		line := fmt.Sprint(r)
		longest = max(longest, len(line))
		return true
	}
	s := &Server{Backend: b}
	if !s.stat("", reply) {
		t.Fatal("stat stopped")
	}
	if longest > 8<<10 {
		t.Errorf("longest response %d bytes, want one cgroup's (a few KiB)", longest)
	}
}

// BenchmarkStat10000 runs `memcgd stat`'s exchange for 10,000 cgroups
// over a real socket, daemon and client in one process, the client
// dropping each report, and prints the peak RSS of the process during it
// (VmHWM, reset before). Target (issue 9, defect 14): < 0.5 s, < 64 MiB.
//
//	go test ./control -run '^$' -bench Stat10000 -benchmem
func BenchmarkStat10000(b *testing.B) {
	path, _ := serve(b, newManyBackend(10000))
	c, err := Dial(path)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	runtime.GC()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Logf("cannot reset peak RSS: %v", err)
	}
	cpu0 := cpuTime(b)
	n := 0
	for b.Loop() {
		n = 0
		if err := c.StatEach(context.Background(), "", func(Report) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
	if n != 10000 {
		b.Fatalf("%d reports, want 10000", n)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(rest), "%f kB", &kb)
			b.ReportMetric(kb/1024, "peak-RSS-MiB")
		}
	}
}

// Issue 7: `memcgd stat` says why a cgroup is not throttled. The reason
// travels with the report, only for the cgroups that have one.
func TestStatCarriesWhyNotThrottled(t *testing.T) {
	b := newManyBackend(3)
	b.sts[1].Throttle = "throttle unavailable: no freezer cgroup reaches /x"
	path, _ := serve(t, b)
	c := dial(t, path)
	var got []string
	if err := c.StatEach(context.Background(), "", func(r Report) error {
		got = append(got, r.Throttle)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{"", b.sts[1].Throttle, ""}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Throttle of the reports = %q, want %q", got, want)
	}
}
