package act_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/act"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/host"
	"golang.org/x/sys/unix"
)

// promptly bounds how long a reclaim with nothing to reclaim may take. On
// the development machine it takes about 3 ms; the bound is for qemu's
// emulated CPUs on a loaded host. Before issue 9 it never returned on v2.
const promptly = 30 * time.Second

// within runs f in a goroutine and fails the test if it has not returned
// within d: a hang is a failure, not a stuck test.
func within(t *testing.T, d time.Duration, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- f() }()
	select {
	case err := <-done:
		t.Logf("%s returned in %v: %v", what, time.Since(start).Round(time.Microsecond), err)
		return err
	case <-time.After(d):
		t.Fatalf("%s has not returned after %v", what, d)
		return nil
	}
}

// issue 9, defect 12: a cgroup holding only anonymous memory at its limit
// (no swap) has nothing to reclaim. The kernel says so with EAGAIN on
// memory.reclaim, which must reach memcgd, and Reclaim must return
// host.ErrNothingReclaimed at once, on either version.
func TestReclaimOfAnonOnlyCgroupReturnsPromptly(t *testing.T) {
	l := cgrouptest.Layout(t)
	if swapOn(t) {
		t.Skip("swap is on: anonymous memory is reclaimable")
	}
	const limit = 64 * mib
	c := cgrouptest.New(t, l, limit)
	startHog(t, c, limit-8*mib, false)
	j := cgrouptest.Journal(t, l)
	limitBefore := cgroupLimit(t, l, c)

	t.Run("Reclaim", func(t *testing.T) {
		var got uint64
		err := within(t, promptly, "Reclaim", func() (err error) {
			got, err = act.Reclaim(context.Background(), l, c.Path, 16*mib, 0, j, nil)
			return err
		})
		if !errors.Is(err, host.ErrNothingReclaimed) {
			t.Errorf("Reclaim = %d bytes, %v; want host.ErrNothingReclaimed", got, err)
		}
		if p := j.Pending(); len(p) != 0 {
			t.Errorf("journal holds %v, want nothing pending", p)
		}
		if got := cgroupLimit(t, l, c); got != limitBefore {
			t.Errorf("limit after Reclaim = %s, want %s", got, limitBefore)
		}
	})
	t.Run("memory.reclaim answers EAGAIN", func(t *testing.T) {
		if l.Memory.Version != layout.V2 {
			t.Skip("memory.reclaim is cgroup v2's")
		}
		file := filepath.Join(c.Dir, "memory.reclaim")
		err := within(t, promptly, "write memory.reclaim", func() error {
			return ctlfile.Write(file, "16777216")
		})
		if !errors.Is(err, unix.EAGAIN) {
			t.Errorf("write 16 MiB to %s: %v, want EAGAIN", file, err)
		}
	})
}

// swapOn reports whether the machine has swap space: /proc/swaps lists
// one below its header line.
func swapOn(t *testing.T) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/swaps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(strings.TrimSpace(string(b)), "\n") > 0
}

// cgroupLimit is limit, named apart from the variables called limit.
func cgroupLimit(t *testing.T, l layout.Layout, c *cgrouptest.Cgroup) string {
	t.Helper()
	return limit(t, l, c)
}
