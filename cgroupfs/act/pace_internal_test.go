package act

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/layout"
)

// The pacer tells the dirtying threads by each thread's own write_bytes
// (/proc/TID/task/TID/io), not /proc/TID/io, which sums the whole thread
// group: a sleeping thread of a writing process must not look like a
// dirtier.
func TestThePacerReadsEachThreadsOwnWriteBytes(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"memory/w/tasks": "100\n101\n",
		// The group's sum, as the kernel shows it under either TID.
		"proc/100/io": "write_bytes: 5000\n",
		"proc/101/io": "write_bytes: 5000\n",
		// Each thread's own.
		"proc/100/task/100/io": "write_bytes: 5000\n",
		"proc/101/task/101/io": "write_bytes: 0\n",
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := &Pacer{Layout: layout.Layout{Memory: layout.Hierarchy{Version: layout.V1, Mount: filepath.Join(root, "memory"), Root: "/"}},
		ProcRoot: filepath.Join(root, "proc")}
	s, err := p.sample("/w")
	if err != nil {
		t.Fatal(err)
	}
	if s.bytes[100] != 5000 || s.bytes[101] != 0 {
		t.Errorf("write_bytes by thread %v, want 100: 5000 and 101: 0, each thread's own", s.bytes)
	}
}

func TestGrownTellsTheThreadsThatDirtied(t *testing.T) {
	for _, tt := range []struct {
		name      string
		prev, cur map[int]uint64
		want      []int
	}{
		{"none grew", map[int]uint64{1: 10, 2: 20}, map[int]uint64{1: 10, 2: 20}, nil},
		{"one grew", map[int]uint64{1: 10, 2: 20}, map[int]uint64{1: 10, 2: 4116}, []int{2}},
		{"a new thread that wrote counts from 0", map[int]uint64{1: 10}, map[int]uint64{1: 10, 7: 4096, 3: 0}, []int{7}},
		{"several, sorted", map[int]uint64{9: 0, 4: 0}, map[int]uint64{9: 1, 4: 1}, []int{4, 9}},
	} {
		got := grown(threadSample{bytes: tt.prev}, threadSample{bytes: tt.cur})
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: grown = %v, want %v", tt.name, got, tt.want)
		}
	}
}
