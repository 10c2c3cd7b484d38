package act_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/act"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
)

// oomControl reads c's memory.oom_control as a map, independently of
// package format.
func oomControl(t *testing.T, dir string) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "memory.oom_control"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]uint64{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, " ")
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("memory.oom_control line %q", line)
		}
		m[k] = n
	}
	return m
}

// v1Only skips a test of the v1 limit squeeze on a v2 host.
func v1Only(t *testing.T, l layout.Layout) {
	t.Helper()
	if l.Memory.Version != layout.V1 {
		t.Skip("the limit squeeze is cgroup v1's; this host has the memory controller on v2")
	}
}

// issue 9, defect 9: a squeeze must not lower the limit of a cgroup whose
// charges could not reclaim in the lowered window. Each case holds page
// cache the old squeeze would have reclaimed; the squeeze must refuse
// (host.ErrNothingReclaimed), reclaim nothing and leave the limit as it
// was.
func TestSqueezeRefusesWhereALoweredLimitCouldOOM(t *testing.T) {
	l := cgrouptest.Layout(t)
	v1Only(t, l)
	dir := cgrouptest.DiskDir(t)
	const limit = 128 * mib
	tests := []struct {
		name string
		// setup fills the cgroup to squeeze and returns it.
		setup func(t *testing.T) *cgrouptest.Cgroup
	}{
		{"a parent: its children charge against its limit", func(t *testing.T) *cgrouptest.Cgroup {
			p := cgrouptest.New(t, l, limit)
			child := p.Child(t, "child")
			writeSynced(t, child, filepath.Join(dir, "cache"), 32*mib)
			return p
		}},
		{"oom_kill_disable: a charge in the window would hang", func(t *testing.T) *cgrouptest.Cgroup {
			c := cgrouptest.New(t, l, limit)
			if err := ctlfile.Write(filepath.Join(c.Dir, "memory.oom_control"), "1"); err != nil {
				t.Fatal(err)
			}
			writeSynced(t, c, filepath.Join(dir, "cache"), 32*mib)
			return c
		}},
		{"anon-heavy: less clean cache than the squeeze always leaves", func(t *testing.T) *cgrouptest.Cgroup {
			c := cgrouptest.New(t, l, limit)
			writeSynced(t, c, filepath.Join(dir, "cache"), 4*mib)
			startHog(t, c, 96*mib, false)
			return c
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.setup(t)
			j := cgrouptest.Journal(t, l)
			limitBefore, before := cgroupLimit(t, l, c), c.Usage(t)
			// Ask for about the cache: the old squeeze took it.
			got, err := act.SqueezeV1(context.Background(), c.Dir, 4*mib, j)
			t.Logf("squeeze of %s: %d bytes, %v (usage %.1f MiB before)", c.Path, got, err, float64(before)/mib)
			if !errors.Is(err, host.ErrNothingReclaimed) || got != 0 {
				t.Errorf("SqueezeV1 = %d bytes, %v; want 0, host.ErrNothingReclaimed", got, err)
			}
			if got := cgroupLimit(t, l, c); got != limitBefore {
				t.Errorf("limit after the squeeze = %s, want %s", got, limitBefore)
			}
			if p := j.Pending(); len(p) != 0 {
				t.Errorf("journal holds %v, want nothing pending", p)
			}
		})
	}
}

// issue 9, defect 9: 200 squeezes of an anon-heavy cgroup (anonymous
// memory near its limit, charging all the time, a little page cache kept
// warm by a reader) kill nothing: memory.oom_control's oom_kill stays
// where it was, under_oom stays 0, the hog lives.
func TestSqueezeNeverOOMKillsAnAnonHeavyCgroup(t *testing.T) {
	l := cgrouptest.Layout(t)
	v1Only(t, l)
	if swapOn(t) {
		t.Skip("swap is on: anonymous memory is reclaimable")
	}
	dir := cgrouptest.DiskDir(t)
	const (
		limit   = 128 * mib
		cache   = 16 * mib
		anon    = limit - cache - 16*mib
		squeeze = 200
	)
	c := cgrouptest.New(t, l, limit)
	file := filepath.Join(dir, "cache")
	writeSynced(t, c, file, cache)
	c.Start(t, "sh", "-c", `while :; do cat "$0" >/dev/null; done`, file)
	pid := startHog(t, c, anon, true)
	j := cgrouptest.Journal(t, l)
	before := oomControl(t, c.Dir)
	if _, ok := before["oom_kill"]; !ok {
		t.Skip("this kernel's memory.oom_control has no oom_kill counter (before 4.13)")
	}
	limitBefore := cgroupLimit(t, l, c)
	var got uint64
	var refused int
	// Each squeeze asks for half the cache; the reader refaults what it
	// takes.
	for i := range squeeze {
		n, err := act.SqueezeV1(context.Background(), c.Dir, cache/2, j)
		switch {
		case errors.Is(err, host.ErrNothingReclaimed):
			refused++
		case err != nil:
			t.Fatalf("squeeze %d: %v", i, err)
		}
		got += n
		if oc := oomControl(t, c.Dir); oc["under_oom"] != 0 || oc["oom_kill"] != before["oom_kill"] {
			t.Fatalf("after squeeze %d: memory.oom_control %v, was %v", i, oc, before)
		}
	}
	after := oomControl(t, c.Dir)
	t.Logf("%d squeezes of %d MiB: %.1f MiB reclaimed in all, %d refused; oom_kill %d -> %d, failcnt %d",
		squeeze, cache/2/mib, float64(got)/mib, refused, before["oom_kill"], after["oom_kill"], cgrouptest.ValueFile(t, c.Dir, "memory.failcnt"))
	if after["oom_kill"] != before["oom_kill"] {
		t.Errorf("oom_kill %d -> %d, want no OOM kill", before["oom_kill"], after["oom_kill"])
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Errorf("hog %d: %v, want it alive", pid, err)
	}
	if got := cgroupLimit(t, l, c); got != limitBefore {
		t.Errorf("limit after the squeezes = %s, want %s", got, limitBefore)
	}
}
