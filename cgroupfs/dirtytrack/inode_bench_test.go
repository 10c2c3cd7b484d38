package dirtytrack

import (
	"fmt"
	"testing"
)

// BenchmarkInodes is the cost of one Inodes call against the number of
// (cgroup, inode) records the map holds: the records of every memcg on
// the host that dirties files, not only the throttled one's. The cgroup
// asked about has 4. (A write-out with the tracker calls it once every
// cgroupfs.ListEvery, and Recent, BenchmarkRecent, otherwise.)
func BenchmarkInodes(b *testing.B) {
	for _, n := range []int{100, 10_000, 65_536} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			tr, err := Load(Options{MaxInodes: uint32(n)})
			if err != nil {
				b.Skipf("load: %v", err)
			}
			defer tr.Close()
			const id = 1 << 40 // no real cgroup's: the host's own records stay apart
			for i := range n {
				k := dirtytrackInodeKey{Cgroup: id + 1 + uint64(i%1000), Ino: uint64(i), Dev: 1}
				if i >= n-4 { // last, so that the LRU keeps them
					k.Cgroup = id
				}
				if err := tr.objs.Inodes.Put(k, dirtytrackInodeVal{Jiffies: uint64(i)}); err != nil {
					b.Fatalf("put record %d: %v", i, err)
				}
			}
			b.ResetTimer()
			for range b.N {
				got, err := tr.Inodes(id)
				if err != nil {
					b.Fatal(err)
				}
				if len(got) < 4 {
					b.Fatalf("Inodes = %d records, want at least 4", len(got))
				}
			}
		})
	}
}

// BenchmarkRecent is the cost of one Recent call, which a write-out with
// the tracker makes every time, for a watched cgroup whose ring is full
// (16 entries), beside a full map of other cgroups' recent entries.
func BenchmarkRecent(b *testing.B) {
	const others = 16384
	tr, err := Load(Options{MaxRecent: others + recentLen})
	if err != nil {
		b.Skipf("load: %v", err)
	}
	defer tr.Close()
	const id = 1 << 40 // no real cgroup's
	for i := range others {
		k := dirtytrackRecentKey{Id: id + 1 + uint64(i/recentLen), Idx: uint32(i % recentLen)}
		if err := tr.objs.Recent.Put(k, dirtytrackRecentVal{Ino: uint64(i), Dev: 1}); err != nil {
			b.Fatalf("put entry %d: %v", i, err)
		}
	}
	if err := tr.Watch(id, Never); err != nil {
		b.Fatal(err)
	}
	slot := tr.slots[id]
	if err := tr.objs.Counts.Put(slot, dirtytrackCount{Recent: 100}); err != nil {
		b.Fatal(err)
	}
	for i := range uint32(recentLen) {
		if err := tr.objs.Recent.Put(dirtytrackRecentKey{Id: id, Idx: i}, dirtytrackRecentVal{Ino: uint64(1000 + i), Dev: 1}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		got, err := tr.Recent(id)
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != recentLen {
			b.Fatalf("Recent = %d inodes, want %d", len(got), recentLen)
		}
	}
}
