package sched

import "testing"

// The ops in flight are kept by ID whatever the order their results come
// back in, and a slab that a burst grew is given back once the burst has
// drained, its entries still found.
func TestPendingOpsKeepEveryOpUntilTaken(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n     int // ops put
		taken func(id uint64) bool
	}{
		{"a few, all taken", 3, func(uint64) bool { return true }},
		{"a burst, all taken", 10 * keptSlots, func(uint64) bool { return true }},
		{"a burst, the odd ones left", 10 * keptSlots, func(id uint64) bool { return id%2 == 0 }},
		{"a burst, a few left", 10 * keptSlots, func(id uint64) bool { return id%97 != 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q pendingOps
			for id := uint64(1); id <= uint64(tc.n); id++ {
				q.put(pendingOp{op: Op{ID: id, Bytes: id * 10}})
			}
			left := 0
			for id := uint64(1); id <= uint64(tc.n); id++ {
				if !tc.taken(id) {
					left++
					continue
				}
				p, ok := q.take(id)
				if !ok || p.op.ID != id || p.op.Bytes != id*10 {
					t.Fatalf("take(%d) = %+v, %v; want the op put under it", id, p.op, ok)
				}
				if _, ok := q.take(id); ok {
					t.Fatalf("take(%d) found it again", id)
				}
			}
			if q.len() != left {
				t.Errorf("%d in flight, want %d", q.len(), left)
			}
			for id := uint64(1); id <= uint64(tc.n); id++ {
				if p := q.get(id); (p != nil) == tc.taken(id) || p != nil && p.op.Bytes != id*10 {
					t.Fatalf("get(%d) = %+v after the takes; want it only if not taken", id, p)
				}
			}
			if len(q.slab) > max(keptSlots, 8*left+16) {
				t.Errorf("the slab holds %d slots for %d ops in flight: want it given back", len(q.slab), left)
			}
		})
	}
}
