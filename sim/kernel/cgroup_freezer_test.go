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
