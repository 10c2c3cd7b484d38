package act

import "testing"

// The cap on memory.reclaim, checked against sums worked by hand from
// mm/memcontrol.c effective_protection (without memory_recursiveprot).
func TestProtectedCap(t *testing.T) {
	const M = 1 << 20
	leaf := func(usage, setting, file uint64) *memNode {
		return &memNode{usage: usage, setting: setting, file: file}
	}
	tree := func(usage, setting, file uint64, children ...*memNode) *memNode {
		n := leaf(usage, setting, file)
		n.children = children
		return n
	}
	tests := []struct {
		name string
		root *memNode
		want uint64
	}{
		{"no protection: all file cache",
			tree(100*M, 0, 60*M, leaf(50*M, 0, 30*M), leaf(50*M, 0, 30*M)), 60 * M},
		{"a child below its low keeps all of it",
			tree(100*M, 0, 80*M, leaf(30*M, 50*M, 30*M), leaf(70*M, 0, 50*M)), 50 * M},
		{"a child above its low gives only the excess",
			tree(100*M, 0, 100*M, leaf(60*M, 40*M, 60*M), leaf(40*M, 0, 40*M)), 60 * M},
		{"anonymous memory is not counted",
			tree(100*M, 0, 10*M, leaf(30*M, 50*M, 10*M), leaf(70*M, 0, 0)), 0},
		{"the target's own low is kept",
			tree(100*M, 90*M, 100*M, leaf(100*M, 0, 100*M)), 10 * M},
		{"memory.min counts as low does",
			tree(64*M, 0, 64*M, leaf(32*M, 32*M, 32*M), leaf(32*M, 0, 32*M)), 32 * M},
		{"grandchildren share their parent's protection when over-claimed",
			// The child has 20 MiB of protection; its two children claim
			// 20 and 20, so each gets 10 and gives 10 of its 20.
			tree(100*M, 0, 100*M,
				tree(40*M, 20*M, 40*M, leaf(20*M, 20*M, 20*M), leaf(20*M, 20*M, 20*M)),
				leaf(60*M, 0, 60*M)),
			60*M + 20*M},
		{"a grandchild without low under a protected child is reclaimable, within the child's excess",
			tree(100*M, 0, 100*M,
				tree(50*M, 50*M, 50*M, leaf(50*M, 0, 50*M)),
				leaf(50*M, 0, 50*M)),
			50 * M},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := available(tt.root, min(tt.root.usage, tt.root.setting), true)
			if got != tt.want {
				t.Errorf("available = %d MiB, want %d MiB", got/M, tt.want/M)
			}
		})
	}
}
