package act

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/layout"
	"github.com/memcgd/memcgd/cgroupfs/safeio"
	"golang.org/x/sys/unix"
)

// chunkRig runs write-outs over files in a directory with a clock that
// each sync_file_range call moves on by delay (a millisecond unless set),
// and records the calls as "file@offset+length" in MiB.
type chunkRig struct {
	t     *testing.T
	dir   string
	w     *WriteOuts
	mu    sync.Mutex
	now   time.Time
	delay time.Duration // each call's
	// cost is the time of the calls it names ("file@offset+length" in
	// MiB) instead of delay: a sweep of a clean range takes a microsecond.
	cost  map[string]time.Duration
	calls []string
}

const chunkMiB = 1 << 20

func newChunkRig(t *testing.T) *chunkRig { return newSpacedChunkRig(t, 0) }

// newSpacedChunkRig is newChunkRig with WriteOutsOptions.Gap gap; its
// sleeps move the clock on and are recorded as "sleep DURATION".
func newSpacedChunkRig(t *testing.T, gap time.Duration) *chunkRig {
	t.Helper()
	r := &chunkRig{t: t, dir: t.TempDir(), now: time.Unix(1000, 0), delay: time.Millisecond}
	bio, err := safeio.NewBoundedIO(safeio.IOOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.w, err = NewWriteOuts(bio, "/proc", layout.Layout{}, WriteOutsOptions{
		Gap: gap,
		sleep: func(d time.Duration) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.calls = append(r.calls, "sleep "+d.String())
			r.now = r.now.Add(d)
		},
		now: func() time.Time {
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.now
		},
		sync: func(fd int, off, n int64) error {
			p, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
			if err != nil {
				return err
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			call := fmt.Sprintf("%s@%d+%d", filepath.Base(p), off/chunkMiB, n/chunkMiB)
			r.calls = append(r.calls, call)
			if d, ok := r.cost[call]; ok {
				r.now = r.now.Add(d)
			} else {
				r.now = r.now.Add(r.delay)
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// file makes a file of size MiB and returns it as a chunkFile on key.
func (r *chunkRig) file(name string, size int64, key safeio.Key) chunkFile {
	r.t.Helper()
	p := filepath.Join(r.dir, name)
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Truncate(p, size*chunkMiB); err != nil {
		r.t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		r.t.Fatal(err)
	}
	return chunkFile{id: fileID{st.Dev, st.Ino}, key: key, open: func() (*os.File, error) { return os.Open(p) }}
}

// run is one write-out of files from c with a budget of chunks chunks
// (the deadline falls half a millisecond after the last of them starts),
// the cgroup holding dirty MiB dirty, and returns its calls and how many
// files it started.
func (r *chunkRig) run(c *cursor, files []chunkFile, chunks int, dirty uint64) ([]string, int) {
	r.t.Helper()
	r.mu.Lock()
	deadline := r.now.Add(time.Duration(chunks)*time.Millisecond - time.Millisecond/2)
	r.calls = nil
	r.mu.Unlock()
	n, err := r.w.chunks(context.Background(), c, files, deadline, tailSpan(dirty*chunkMiB), r.w.gap(files))
	if err != nil {
		r.t.Fatalf("chunks: %v", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls), n
}

func TestWriteOutChunks(t *testing.T) {
	key := safeio.DeviceKey(1)
	type op struct {
		budget    int // chunks
		want      string
		wantFiles int
		dirty     uint64 // MiB the cgroup holds dirty; 0: 64
	}
	clean := time.Microsecond // a sweep's call over a clean range
	tests := []struct {
		name  string
		delay time.Duration // of a call, if not a millisecond
		cost  map[string]time.Duration
		files func(r *chunkRig) []chunkFile
		ops   []op
	}{
		{
			name:  "a large file is written out from its tail, as far from its end as the cgroup has dirty bytes",
			cost:  map[string]time.Duration{"a@0+32": clean, "a@32+4": clean},
			files: func(r *chunkRig) []chunkFile { return []chunkFile{r.file("a", 40, key)} },
			ops: []op{
				// 6 MiB dirty: two chunks before the end, and the rest swept
				{budget: 100, dirty: 6, want: "a@0+32 a@32+4 a@36+4", wantFiles: 1},
				// past the end: back to the tail, the sweep going on before it
				{budget: 100, dirty: 2, want: "a@32+4 a@36+4", wantFiles: 1},
				{budget: 100, dirty: 100, want: "a@0+4 a@4+4 a@8+4 a@12+4 a@16+4 a@20+4 a@24+4 a@28+4 a@32+4 a@36+4", wantFiles: 1},
			},
		},
		{
			name:  "a file written in place is swept before its tail, a stride a write-out, round and round",
			cost:  map[string]time.Duration{"a@0+64": clean, "a@64+64": clean, "a@128+64": clean},
			files: func(r *chunkRig) []chunkFile { return []chunkFile{r.file("a", 200, key)} },
			ops: []op{
				{budget: 100, dirty: 6, want: "a@0+64 a@192+4 a@196+4", wantFiles: 1},
				{budget: 100, dirty: 6, want: "a@64+64 a@192+4 a@196+4", wantFiles: 1},
				{budget: 100, dirty: 6, want: "a@128+64 a@192+4 a@196+4", wantFiles: 1},
				{budget: 100, dirty: 6, want: "a@0+64 a@192+4 a@196+4", wantFiles: 1},
			},
		},
		{
			name:  "a stride in which the sweep found dirty pages (its call took SweepFound) is swept again",
			cost:  map[string]time.Duration{"a@0+64": clean, "a@64+64": SweepFound, "a@128+64": clean},
			files: func(r *chunkRig) []chunkFile { return []chunkFile{r.file("a", 200, key)} },
			ops: []op{
				{budget: 100, dirty: 6, want: "a@0+64 a@192+4 a@196+4", wantFiles: 1},
				{budget: 100, dirty: 6, want: "a@64+64 a@192+4 a@196+4", wantFiles: 1},
				{budget: 100, dirty: 6, want: "a@64+64 a@192+4 a@196+4", wantFiles: 1},
			},
		},
		{
			name:  "a sweep that waited for the device's queue ends the write-out, and its stride is swept again",
			delay: WriteOutQueueFull,
			files: func(r *chunkRig) []chunkFile { return []chunkFile{r.file("a", 200, key)} },
			ops: []op{
				{budget: 100, dirty: 6, want: "a@0+64", wantFiles: 1},
				{budget: 100, dirty: 6, want: "a@0+64", wantFiles: 1},
			},
		},
		{
			name:  "a chunk that waited for the device's queue ends the write-out: the device has enough to do",
			delay: WriteOutQueueFull,
			files: func(r *chunkRig) []chunkFile {
				return []chunkFile{r.file("a", 10, key), r.file("b", 10, key)}
			},
			ops: []op{
				{budget: 100, want: "a@0+4", wantFiles: 1},
				{budget: 100, want: "b@0+4", wantFiles: 1},
				{budget: 100, want: "a@4+4", wantFiles: 1},
			},
		},
		{
			name:  "a file larger than a chunk is written a chunk at a time, each write-out going on where the last stopped",
			files: func(r *chunkRig) []chunkFile { return []chunkFile{r.file("a", 10, key)} },
			ops: []op{
				{budget: 2, want: "a@0+4 a@4+4", wantFiles: 1},
				{budget: 2, want: "a@8+2 a@0+4", wantFiles: 1},
				{budget: 9, want: "a@4+4 a@8+2 a@0+4", wantFiles: 1}, // covered once round to where it began: done
			},
		},
		{
			name: "files take turns, a chunk each per round, until each is covered once",
			files: func(r *chunkRig) []chunkFile {
				return []chunkFile{r.file("a", 10, key), r.file("b", 6, key)}
			},
			ops: []op{{budget: 100, want: "a@0+4 b@0+4 a@4+4 b@4+2 a@8+2", wantFiles: 2}},
		},
		{
			name: "the next write-out begins with the file the budget left without its turn",
			files: func(r *chunkRig) []chunkFile {
				return []chunkFile{r.file("a", 1, key), r.file("b", 1, key), r.file("c", 1, key)}
			},
			ops: []op{
				{budget: 2, want: "a@0+1 b@0+1", wantFiles: 2},
				{budget: 2, want: "c@0+1 a@0+1", wantFiles: 2},
			},
		},
		{
			name: "after a write-out that covered everything, the next begins with the second file",
			files: func(r *chunkRig) []chunkFile {
				return []chunkFile{r.file("a", 1, key), r.file("b", 1, key)}
			},
			ops: []op{
				{budget: 100, want: "a@0+1 b@0+1", wantFiles: 2},
				{budget: 100, want: "b@0+1 a@0+1", wantFiles: 2},
			},
		},
		{
			name: "the first chunk is started whatever the budget",
			files: func(r *chunkRig) []chunkFile {
				return []chunkFile{r.file("a", 1, key), r.file("b", 1, key)}
			},
			ops: []op{{budget: 0, want: "a@0+1", wantFiles: 1}, {budget: 0, want: "b@0+1", wantFiles: 1}},
		},
		{
			name: "an empty file is skipped: 0 bytes would ask for the whole file",
			files: func(r *chunkRig) []chunkFile {
				return []chunkFile{r.file("empty", 0, key), r.file("a", 1, key)}
			},
			ops: []op{{budget: 100, want: "a@0+1", wantFiles: 1}},
		},
		{
			name: "a file listed twice is written once",
			files: func(r *chunkRig) []chunkFile {
				a := r.file("a", 5, key)
				again := a
				again.key = safeio.MountKey(9)
				return []chunkFile{a, again}
			},
			ops: []op{{budget: 100, want: "a@0+4 a@4+1", wantFiles: 1}},
		},
		{
			name: "files on two filesystems take turns too",
			files: func(r *chunkRig) []chunkFile {
				return []chunkFile{r.file("a", 5, key), r.file("b", 5, safeio.DeviceKey(2))}
			},
			ops: []op{{budget: 100, want: "a@0+4 b@0+4 a@4+1 b@4+1", wantFiles: 2}},
		},
		{
			name: "a file that cannot be opened is skipped",
			files: func(r *chunkRig) []chunkFile {
				gone := r.file("gone", 1, key)
				gone.open = func() (*os.File, error) { return nil, errSkip }
				return []chunkFile{gone, r.file("a", 1, key)}
			},
			ops: []op{{budget: 100, want: "a@0+1", wantFiles: 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newChunkRig(t)
			if tt.delay != 0 {
				r.delay = tt.delay
			}
			r.cost = tt.cost
			files := tt.files(r)
			c := r.w.take("/cg")
			for i, op := range tt.ops {
				if op.dirty == 0 {
					op.dirty = 64
				}
				calls, n := r.run(c, files, op.budget, op.dirty)
				if got := strings.Join(calls, " "); got != op.want || n != op.wantFiles {
					t.Errorf("write-out %d: %q, %d files; want %q, %d files", i+1, got, n, op.want, op.wantFiles)
				}
			}
		})
	}
}

// Forget drops a cgroup's cursor: its next write-out starts over.
func TestWriteOutsForget(t *testing.T) {
	r := newChunkRig(t)
	files := []chunkFile{r.file("a", 10, safeio.DeviceKey(1))}
	c := r.w.take("/cg")
	r.run(c, files, 1, 64)
	r.w.put(c)
	if c2 := r.w.take("/cg"); c2 != c {
		t.Fatalf("the cursor was not kept")
	} else {
		r.w.put(c2)
	}
	r.w.Forget("/cg")
	c3 := r.w.take("/cg")
	if calls, _ := r.run(c3, files, 1, 64); strings.Join(calls, " ") != "a@0+4" {
		t.Errorf("after Forget: %v, want the file from its start", calls)
	}
	// A cursor in use is not shared by a concurrent write-out.
	if c4 := r.w.take("/cg"); c4 == c3 {
		t.Errorf("a busy cursor was handed out twice")
	}
}

func TestSpacedWriteOutKeepsItsChunksAGapApart(t *testing.T) {
	key := safeio.DeviceKey(1)
	for _, tt := range []struct {
		name  string
		gap   time.Duration
		delay time.Duration // of each call
		want  string
		exact bool // the calls are want, not only begin with it
	}{
		{
			name:  "no gap: 4 MiB chunks back to back",
			delay: 100 * time.Microsecond,
			want:  "a@0+4 a@4+4 a@8+4",
			exact: true,
		},
		{
			name:  "a gap longer than a call: 1 MiB chunks, each started the gap after the last returned",
			gap:   250 * time.Microsecond,
			delay: 100 * time.Microsecond,
			want:  "a@0+1 sleep 250µs a@1+1 sleep 250µs a@2+1 sleep 250µs a@3+1",
		},
		{
			name:  "the budget (10 ms) counts the sleeps: a turn begun before it ends sleeps and submits, and the rest waits for the next write-out",
			gap:   time.Millisecond,
			delay: 1500 * time.Microsecond,
			want:  "a@0+1 sleep 1ms a@1+1 sleep 1ms a@2+1 sleep 1ms a@3+1 sleep 1ms a@4+1",
			exact: true,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newSpacedChunkRig(t, tt.gap)
			r.delay = tt.delay
			files := []chunkFile{r.file("a", 12, key)}
			c := &cursor{at: make(map[fileID]int64)}
			// 12 MiB dirty: the whole file is its tail; a budget of 10 ms.
			r.mu.Lock()
			r.calls = nil
			deadline := r.now.Add(10 * time.Millisecond)
			r.mu.Unlock()
			n, err := r.w.chunks(context.Background(), c, files, deadline, tailSpan(12*chunkMiB), r.w.gap(files))
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(r.calls, " ")
			if n != 1 || !strings.HasPrefix(got, tt.want) || tt.exact && got != tt.want {
				t.Errorf("calls %q (files %d), want %q (files 1), exact %v", got, n, tt.want, tt.exact)
			}
		})
	}
}

// A write-out yields to another task's syncs: while a device of its files
// served a cache flush lately (Syncing), its chunks are 1 MiB, YieldGap
// apart; otherwise 4 MiB back to back, as without YieldGap. A longer Gap
// holds either way.
func TestAWriteOutYieldsToASyncingDevice(t *testing.T) {
	key := safeio.DeviceKey(1)
	for _, tt := range []struct {
		name           string
		gap, yield     time.Duration
		syncing        bool
		want, wantWhat string
	}{
		{"a device syncing: the yield's gap", 0, 250 * time.Microsecond, true,
			"a@0+1 sleep 250µs a@1+1 sleep 250µs a@2+1", "1 MiB chunks 250µs apart"},
		{"no device syncing: back to back", 0, 250 * time.Microsecond, false,
			"a@0+4 a@4+4 a@8+4", "4 MiB chunks back to back"},
		{"no yield: back to back, syncing or not", 0, 0, true,
			"a@0+4 a@4+4 a@8+4", "4 MiB chunks back to back"},
		{"a longer gap holds", time.Millisecond, 250 * time.Microsecond, true,
			"a@0+1 sleep 1ms a@1+1", "1 MiB chunks 1ms apart"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newSpacedChunkRig(t, tt.gap)
			r.delay = 100 * time.Microsecond
			files := []chunkFile{r.file("a", 12, key)}
			var asked []uint64
			r.w.opts.YieldGap, r.w.opts.Syncing = tt.yield, func(dev uint64) bool {
				asked = append(asked, dev)
				return tt.syncing
			}
			calls, _ := r.run(&cursor{at: make(map[fileID]int64)}, files, 10, 12)
			if got := strings.Join(calls, " "); !strings.HasPrefix(got, tt.want) {
				t.Errorf("calls %q, want %s: %q...", got, tt.wantWhat, tt.want)
			}
			if tt.yield > tt.gap && (len(asked) != 1 || asked[0] != files[0].id.dev) {
				t.Errorf("Syncing asked of %v, want once of the file's device %d", asked, files[0].id.dev)
			}
		})
	}
}

func TestNewWriteOutsRefusesAGapOutOfRange(t *testing.T) {
	bio, err := safeio.NewBoundedIO(safeio.IOOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, gap := range []time.Duration{-time.Microsecond, MaxWriteOutGap + time.Microsecond} {
		_, err := NewWriteOuts(bio, "/proc", layout.Layout{}, WriteOutsOptions{Gap: gap})
		if err == nil || !strings.Contains(err.Error(), "Gap "+gap.String()) {
			t.Errorf("Gap %v: err %v, want one naming the Gap and its value", gap, err)
		}
		_, err = NewWriteOuts(bio, "/proc", layout.Layout{}, WriteOutsOptions{YieldGap: gap})
		if err == nil || !strings.Contains(err.Error(), "YieldGap "+gap.String()) {
			t.Errorf("YieldGap %v: err %v, want one naming the YieldGap and its value", gap, err)
		}
	}
}
