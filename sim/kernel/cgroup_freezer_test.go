package kernel

import "testing"

// A held freeze stops the cgroup's writer at its next system call: it
// dirties and charges nothing until the thaw, and the time counts as
// paused; after the thaw it writes again.
func TestFreezeCgroupStopsDirtyingUntilThawed(t *testing.T) {
	k := testKernel(t, 2, Options{})
	m := k.NewMemcg(0, "/w", -1, -1)
	task := k.NewTask("w", m, &seqWriter{ino: int64(k.NewInode(0)), pages: 1 << 20, block: 4}, 0)
	k.Advance(10 * Millisecond)
	k.FreezeCgroup(m)
	k.Advance(11 * Millisecond) // the system call in progress completes
	before, usage := k.memcgs[m].hev[meDirtied], k.memcgs[m].usage
	k.Advance(100 * Millisecond)
	if d := k.memcgs[m].hev[meDirtied] - before; d != 0 || k.memcgs[m].usage > usage {
		t.Errorf("frozen: %d pages dirtied, usage %d → %d", d, usage, k.memcgs[m].usage)
	}
	if !k.CgroupFrozen(m) {
		t.Fatal("not frozen")
	}
	k.ThawCgroup(m)
	k.Advance(110 * Millisecond)
	if k.memcgs[m].hev[meDirtied] == before {
		t.Errorf("thawed: the writer did not write again")
	}
	if task.Paused < 85*Millisecond || task.Paused > 100*Millisecond {
		t.Errorf("paused %v, want the ~89 ms frozen", task.Paused)
	}
}

// A watch reports once when the dirtied counter passes its threshold, and
// a usage threshold only on crossing from below; the hook is told the
// cgroup.
func TestWatchReportsOnce(t *testing.T) {
	k := testKernel(t, 2, Options{})
	m := k.NewMemcg(0, "/w", -1, -1)
	k.NewTask("w", m, &seqWriter{ino: int64(k.NewInode(0)), pages: 1 << 19, block: 4}, 0)
	var got []int32
	var at []int64
	k.SetWatchHook(func(k *Kernel, c int32) {
		got = append(got, c)
		at = append(at, k.memcgs[c].hev[meDirtied])
	})
	k.Watch(m, 1<<62, 4<<20) // 1024 pages dirtied
	k.Advance(50 * Millisecond)
	if len(got) != 1 || got[0] != m || at[0] <= 1024 || at[0] > 1024+4 {
		t.Fatalf("dirtied watch: reports %v at %v pages, want one for %d just past 1024", got, at, m)
	}
	got = got[:0]
	k.Watch(m, uint64(k.memcgs[m].usage-1)*PageSize, 1<<62) // already above: waits for a crossing
	k.Advance(60 * Millisecond)
	if len(got) != 0 {
		t.Errorf("usage watch armed below usage reported %v without a crossing", got)
	}
	k.Watch(m, uint64(k.memcgs[m].usage+16)*PageSize, 1<<62)
	k.Advance(70 * Millisecond)
	if len(got) != 1 {
		t.Errorf("usage watch: %d reports, want 1", len(got))
	}
}

// A watcher of limit reclaim hears of it as memcgd's watch does: on v1
// once per vmpressure window of pages scanned, on v2 once per change of
// memory.events.local the kernel notifies, at most every 10 ms; and not
// at all when it did not ask.
func TestWatchReclaimReportsLimitReclaim(t *testing.T) {
	const run = 500 * Millisecond
	for _, tc := range []struct {
		name  string
		v     int
		armed bool
	}{
		{"v1, armed", 1, true},
		{"v2, armed", 2, true},
		{"v1, not armed", 1, false},
		{"v2, not armed", 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := testKernel(t, tc.v, Options{})
			m := k.NewMemcg(0, "/w", 16<<20, -1)
			k.NewTask("w", m, &seqWriter{ino: int64(k.NewInode(0)), pages: 1 << 20, block: 256}, 0)
			reports := 0
			k.SetWatchHook(func(k *Kernel, c int32) {
				if c != m {
					t.Errorf("a report for cgroup %d, want %d", c, m)
				}
				reports++
			})
			k.WatchReclaim(m, tc.armed)
			k.Advance(run)
			scanned, maxEvents := k.memcgs[m].hev[mePgscanDirect], k.memcgs[m].ev[meEventsMax]
			if maxEvents == 0 {
				t.Fatal("the writer never met its limit: the case is not exercised")
			}
			var lo, hi int64
			switch {
			case !tc.armed:
			case tc.v == 1:
				// Each report takes a window or more: what one reclaim
				// scanned past it is dropped with the rest, as
				// vmpressure_work_fn zeroes tree_scanned.
				lo, hi = scanned/(4*vmpressureWin), scanned/vmpressureWin
			default:
				lo, hi = 1, min(maxEvents, int64(run/cgroupFileNotifyInterval)+1)
			}
			if n := int64(reports); n < lo || n > hi {
				t.Errorf("%d reports for %d pages scanned in %d limit reclaims over %v: want %d to %d",
					reports, scanned, maxEvents, run, lo, hi)
			}
		})
	}
}
