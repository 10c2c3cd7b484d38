package act_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/act"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/cgroupfs/ctlfile"
	"github.com/memcgd/memcgd/cgroupfs/journal"
	"github.com/memcgd/memcgd/internal/stats"
)

// freezerFile returns the freezer file the layout fz makes Freeze use for
// c, and its frozen and thawed values.
func freezerFile(t *testing.T, fz freezer, c *cgrouptest.Cgroup) (file, frozen, thawed string) {
	t.Helper()
	if dir, ok := fz.layout.UnifiedDir(c.Path); ok {
		return filepath.Join(dir, journal.FileFreeze), "1", "0"
	}
	if dir, ok := fz.layout.FreezerDir(c.Path); ok {
		return filepath.Join(dir, journal.FileFreezerV1), "FROZEN", journal.FreezerThawedV1
	}
	t.Fatalf("no freezer for %s", c.Path)
	return
}

// issue 7 item 3: a throttle episode journals one record, synced once,
// whatever the number of freeze/thaw cycles in it; each cycle stops and
// resumes a busy task; End leaves the cgroup thawed and the journal empty.
// The log gives the latencies of the cycle's steps.
func TestFreezeEpisodeCycles(t *testing.T) {
	l := cgrouptest.Layout(t)
	const cycles = 20
	for _, fz := range freezers(l) {
		t.Run(fz.name, func(t *testing.T) {
			c := cgrouptest.New(t, l, 0)
			pid := c.Start(t, "sh", "-c", "while :; do :; done").Process.Pid
			j := cgrouptest.Journal(t, l)
			jpath := j.Path()
			ctx := context.Background()

			start := time.Now()
			f, err := act.Freeze(ctx, fz.layout, c.Path, j)
			freezeTook := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			size := fileSize(t, jpath)
			if p := j.Pending(); len(p) != 1 {
				t.Fatalf("journal during the episode holds %v, want one record", p)
			}
			var thaws, refreezes, settles []time.Duration
			var thawedRan time.Duration // the busy task's run time while thawed
			var late time.Duration      // the most run time accounted after Settle, in the first window
			for i := range cycles {
				if ok, err := f.Settle(ctx); err != nil || !ok {
					t.Fatalf("cycle %d: Settle = %v, %v; want frozen", i, ok, err)
				}
				settles = append(settles, time.Since(start))
				// The kernel reports the cgroup frozen when its last task
				// enters the freezer, just before that task schedules
				// away (kernel/signal.c do_freezer_trap: cgroup_enter_frozen,
				// then schedule), and schedstat's run time is brought up
				// to date only then (kernel/sched/fair.c update_curr): run
				// time from before the freeze, up to a tick of it, more
				// when qemu stalls the vCPU in between, may still be
				// added after Settle. So the first window only absorbs
				// that; in the second the task must not run at all.
				late0 := runtime(t, pid)
				time.Sleep(5 * time.Millisecond)
				ran0 := runtime(t, pid)
				late = max(late, ran0-late0)
				time.Sleep(5 * time.Millisecond)
				if ran := runtime(t, pid) - ran0; ran > time.Millisecond {
					t.Errorf("cycle %d: the busy task ran %v while frozen (and %v accounted late after Settle)", i, ran, ran0-late0)
				}
				t0 := time.Now()
				if err := f.Thaw(); err != nil {
					t.Fatalf("cycle %d: Thaw: %v", i, err)
				}
				thaws = append(thaws, time.Since(t0))
				ran0 = runtime(t, pid)
				time.Sleep(20 * time.Millisecond)
				thawedRan += runtime(t, pid) - ran0
				start = time.Now()
				if err := f.Refreeze(); err != nil {
					t.Fatalf("cycle %d: Refreeze: %v", i, err)
				}
				refreezes = append(refreezes, time.Since(start))
			}
			// One cycle may pass unscheduled on a loaded machine; all of
			// them may not.
			if thawedRan < time.Millisecond {
				t.Errorf("the busy task ran %v in %d thawed windows of 20 ms", thawedRan, cycles)
			}
			if got := fileSize(t, jpath); got != size {
				t.Errorf("journal grew from %d to %d bytes in %d cycles; want no write within an episode", size, got, cycles)
			}
			if err := f.End(); err != nil {
				t.Fatal(err)
			}
			if !thawed(t, l, c) {
				t.Error("cgroup frozen after End")
			}
			if p := j.Pending(); len(p) != 0 {
				t.Errorf("journal after End holds %v, want nothing pending", p)
			}
			t.Logf("%s: Freeze (record + fsync + write) %v; over %d cycles: Thaw median %v max %v, Refreeze median %v max %v, Refreeze to all tasks stopped median %v; run time accounted after Settle at most %v",
				fz.name, freezeTook.Round(time.Microsecond), cycles, median(thaws), slices.Max(thaws).Round(time.Microsecond),
				median(refreezes), slices.Max(refreezes).Round(time.Microsecond), median(settles), late.Round(time.Microsecond))
		})
	}
}

// An episode ends, the cgroup thawed, when its context ends; one that a
// crash interrupts is thawed by the next run's Recover.
func TestFreezeEpisodeEnds(t *testing.T) {
	l := cgrouptest.Layout(t)
	for _, fz := range freezers(l) {
		t.Run(fz.name+"/context cancelled", func(t *testing.T) {
			c := cgrouptest.New(t, l, 0)
			c.Start(t, "sleep", "60")
			j := cgrouptest.Journal(t, l)
			ctx, cancel := context.WithCancel(context.Background())
			f, err := act.Freeze(ctx, fz.layout, c.Path, j)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			cancel()
			for !thawed(t, l, c) || len(j.Pending()) != 0 {
				if time.Since(start) > 5*time.Second {
					t.Fatalf("5 s after the cancel: thawed %v, journal %v", thawed(t, l, c), j.Pending())
				}
				time.Sleep(time.Millisecond)
			}
			t.Logf("%s: thawed and journalled done %v after the cancel", fz.name, time.Since(start).Round(time.Microsecond))
			if err := f.Refreeze(); err == nil {
				t.Error("Refreeze after the episode ended: no error")
			}
			if !thawed(t, l, c) {
				t.Error("cgroup frozen again after the episode ended")
			}
		})
		t.Run(fz.name+"/crash", func(t *testing.T) {
			c := cgrouptest.New(t, l, 0)
			c.Start(t, "sleep", "60")
			path := filepath.Join(t.TempDir(), "journal")
			j, err := journal.OpenJournal(path, fz.layout)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := act.Freeze(context.Background(), fz.layout, c.Path, j); err != nil {
				t.Fatal(err)
			}
			j.Close() // the crash
			if thawed(t, l, c) {
				t.Fatal("not frozen before the crash")
			}
			j, err = journal.OpenJournal(path, fz.layout)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			if undone, err := j.Recover(context.Background()); err != nil || len(undone) != 1 {
				t.Errorf("Recover = %v, %v; want the freeze undone", undone, err)
			}
			if !thawed(t, l, c) {
				t.Error("cgroup frozen after Recover")
			}
		})
	}
}

// issue 9, defect 8: memcgd neither freezes a cgroup someone else froze
// nor undoes someone else's thaw.
func TestFreezeLeavesOtherWritersAlone(t *testing.T) {
	l := cgrouptest.Layout(t)
	for _, fz := range freezers(l) {
		t.Run(fz.name+"/frozen by someone else", func(t *testing.T) {
			c := cgrouptest.New(t, l, 0)
			c.Start(t, "sleep", "60")
			file, frozen, _ := freezerFile(t, fz, c)
			if err := ctlfile.Write(file, frozen); err != nil {
				t.Fatal(err)
			}
			j := cgrouptest.Journal(t, l)
			if _, err := act.Freeze(context.Background(), fz.layout, c.Path, j); !errors.Is(err, act.ErrFrozenByOther) {
				t.Errorf("Freeze of a frozen cgroup: %v, want ErrFrozenByOther", err)
			}
			if err := act.Pause(context.Background(), fz.layout, c.Path, 10*time.Millisecond, j); err != nil {
				t.Errorf("Pause of a frozen cgroup: %v, want nil", err)
			}
			if got := readFreezer(t, file); got != frozen {
				t.Errorf("%s = %q after Freeze and Pause, want %q: the freeze is the other writer's", file, got, frozen)
			}
			if p := j.Pending(); len(p) != 0 {
				t.Errorf("journal holds %v, want nothing pending", p)
			}
			if err := ctlfile.Write(file, map[string]string{"1": "0", "FROZEN": journal.FreezerThawedV1}[frozen]); err != nil {
				t.Fatal(err)
			}
		})
		t.Run(fz.name+"/thawed by someone else during the episode", func(t *testing.T) {
			c := cgrouptest.New(t, l, 0)
			c.Start(t, "sleep", "60")
			file, _, thawedValue := freezerFile(t, fz, c)
			j := cgrouptest.Journal(t, l)
			f, err := act.Freeze(context.Background(), fz.layout, c.Path, j)
			if err != nil {
				t.Fatal(err)
			}
			if err := ctlfile.Write(file, thawedValue); err != nil {
				t.Fatal(err)
			}
			// memcgd's own Thaw finds the cgroup thawed, not as memcgd
			// left it: the episode must not freeze it again.
			if err := f.Thaw(); !errors.Is(err, journal.ErrChangedByOther) {
				t.Errorf("Thaw after someone else's thaw: %v, want journal.ErrChangedByOther", err)
			}
			if err := f.Refreeze(); !errors.Is(err, journal.ErrChangedByOther) {
				t.Errorf("Refreeze after someone else's thaw: %v, want journal.ErrChangedByOther", err)
			}
			if err := f.End(); !errors.Is(err, journal.ErrChangedByOther) {
				t.Errorf("End after someone else's thaw: %v, want journal.ErrChangedByOther", err)
			}
			if !thawed(t, l, c) {
				t.Error("cgroup frozen after the episode")
			}
			if p := j.Pending(); len(p) != 0 {
				t.Errorf("journal holds %v, want nothing pending", p)
			}
		})
	}
}

// readFreezer reads a freezer file, counting v1's FREEZING as FROZEN.
func readFreezer(t *testing.T, file string) string {
	t.Helper()
	v, err := ctlfile.Read(file)
	if err != nil {
		t.Fatal(err)
	}
	if v == "FREEZING" {
		return "FROZEN"
	}
	return v
}

func fileSize(t *testing.T, p string) int64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func median(ds []time.Duration) time.Duration {
	return stats.Median(slices.Sorted(slices.Values(ds))).Round(time.Microsecond)
}
