// Package workload holds the programs the simulated tasks run: a
// sequential writer (dd, fio), a cold reader, an anonymous allocator, a
// build-like mixed load, a dirtier that leaves pages dirty and goes idle,
// a sleeper that measures how late it wakes, and a write-ahead log that
// appends and fdatasyncs. Each implements kernel.Workload: Step makes one
// system call and keeps the program's own progress.
package workload

import (
	"math/rand/v2"
	"slices"

	"github.com/memcgd/memcgd/internal/stats"
	"github.com/memcgd/memcgd/sim/kernel"
)

var (
	_ kernel.Workload = (*Writer)(nil)
	_ kernel.Workload = (*Reader)(nil)
	_ kernel.Workload = (*Anon)(nil)
	_ kernel.Workload = (*Dirtier)(nil)
	_ kernel.Workload = (*Build)(nil)
	_ kernel.Workload = (*Sleeper)(nil)
	_ kernel.Workload = (*WAL)(nil)
)

// Writer writes Pages pages sequentially into a new file in blocks of
// Block pages (Accesses touches per page: 4 for 1 KiB writes), optionally
// paced at Rate pages per second by a token bucket one block deep.
type Writer struct {
	Ino      int32
	Pages    int64
	Block    int64
	Accesses int
	Rate     int64 // pages/s; 0 is unpaced

	off  int64
	next kernel.Time // pacing: when the next block may start
	// Finished is when the last page was written.
	Finished kernel.Time
}

// Step implements kernel.Workload.
func (w *Writer) Step(k *kernel.Kernel, t *kernel.Task) bool {
	if w.off >= w.Pages {
		w.Finished = t.Now()
		return true
	}
	n := w.Pages - w.off
	if w.Rate > 0 {
		if t.Now() < w.next {
			k.Sleep(t, w.next-t.Now())
			return false
		}
		// One block per step at most; the bucket does not fill while
		// the writer is stalled.
		n = min(n, w.Block)
		w.next = max(w.next, t.Now()-kernel.Time(w.Block)*kernel.Second/kernel.Time(w.Rate)) +
			kernel.Time(n)*kernel.Second/kernel.Time(w.Rate)
	}
	w.off += k.Write(t, w.Ino, w.off, n, w.Block, w.Accesses)
	if w.off >= w.Pages {
		w.Finished = t.Now()
		return true
	}
	return false
}

// Reader reads Pages pages of a file from disk, cold, Window pages at a
// time (the readahead window).
type Reader struct {
	Ino    int32
	Pages  int64
	Window int64
	off    int64
}

// Step implements kernel.Workload.
func (r *Reader) Step(k *kernel.Kernel, t *kernel.Task) bool {
	if r.off >= r.Pages {
		return true
	}
	r.off += k.Read(t, r.Ino, r.off, min(r.Window, r.Pages-r.off))
	return false
}

// Anon faults in Pages anonymous pages at Rate pages/s (0: at once),
// holds them for Hold, then frees them and exits.
type Anon struct {
	Pages int64
	Rate  int64
	Hold  kernel.Time
	got   int64
	held  bool
}

// Step implements kernel.Workload.
func (a *Anon) Step(k *kernel.Kernel, t *kernel.Task) bool {
	if a.got < a.Pages {
		n := a.Pages - a.got
		if a.Rate > 0 {
			n = min(n, max(a.Rate/100, 1))
		}
		a.got += k.AllocAnon(t, n)
		if a.Rate > 0 && a.got < a.Pages {
			k.Sleep(t, kernel.Time(n)*kernel.Second/kernel.Time(a.Rate))
		}
		return false
	}
	if !a.held {
		a.held = true
		if a.Hold > 0 {
			k.Sleep(t, a.Hold)
			return false
		}
	}
	k.FreeAnon(t, a.Pages)
	return true
}

// Dirtier writes Pages pages into a new file and exits, leaving them dirty:
// one of the many idle cgroups holding dirty pages.
type Dirtier struct {
	Ino   int32
	Pages int64
	off   int64
}

// Step implements kernel.Workload.
func (d *Dirtier) Step(k *kernel.Kernel, t *kernel.Task) bool {
	if d.off >= d.Pages {
		return true
	}
	d.off += k.Write(t, d.Ino, d.off, d.Pages-d.off, d.Pages, 1)
	return d.off >= d.Pages
}

// Build is a build-like mixed load: Jobs rounds of reading a source file,
// holding some anonymous memory while compiling, and writing an object
// file; sizes drawn from its own seeded generator.
type Build struct {
	Jobs    int
	NewFile func() int32 // creates a file on the build's disk
	Rand    *rand.Rand
	Compile kernel.Time // CPU time per job

	job   int
	phase int
	src   Reader
	anon  int64 // still to fault in
	held  int64 // faulted in, freed after the compile
	obj   Writer
}

// Step implements kernel.Workload.
func (b *Build) Step(k *kernel.Kernel, t *kernel.Task) bool {
	for {
		switch b.phase {
		case 0:
			if b.job >= b.Jobs {
				return true
			}
			b.src = Reader{Ino: b.NewFile(), Pages: 1 + b.Rand.Int64N(64), Window: 32}
			b.phase = 1
		case 1:
			if b.src.Step(k, t) {
				b.anon = 256 + b.Rand.Int64N(4096)
				b.phase = 2
				continue
			}
			return false
		case 2:
			got := k.AllocAnon(t, b.anon)
			b.anon -= got
			b.held += got
			if b.anon > 0 {
				return false
			}
			k.Compute(t, b.Compile)
			b.phase = 3
			return false
		case 3:
			k.FreeAnon(t, b.held)
			b.held = 0
			b.obj = Writer{Ino: b.NewFile(), Pages: 4 + b.Rand.Int64N(256), Block: 16, Accesses: 1}
			b.phase = 4
		case 4:
			if b.obj.Step(k, t) {
				b.job++
				b.phase = 0
				continue
			}
			return false
		}
	}
}

// Latencies are a program's measured latencies, in the order taken.
type Latencies []kernel.Time

// Percentile is the p-th percentile by the nearest-rank method
// (stats.Percentile): the smallest sample not below p percent of the
// samples (p 100 is the maximum); 0 without samples.
func (l Latencies) Percentile(p float64) kernel.Time {
	return stats.Percentile(slices.Sorted(slices.Values(l)), p)
}

// Sleeper sleeps Interval in a loop (nanosleep) until Until, and records
// how late each wake-up came: the time from the sleep's end to the program
// running again (a frozen cgroup or a throttled cpu group holds it).
type Sleeper struct {
	Interval, Until kernel.Time
	// Late is each wake-up's lateness.
	Late Latencies
	next kernel.Time
}

// Step implements kernel.Workload.
func (s *Sleeper) Step(k *kernel.Kernel, t *kernel.Task) bool {
	if s.next > 0 {
		s.Late = append(s.Late, t.Now()-s.next)
	}
	if t.Now() >= s.Until {
		return true
	}
	s.next = t.Now() + s.Interval
	k.Nanosleep(t, s.Interval)
	return false
}

// WAL is a database's write-ahead log: it appends Block pages to its file
// and fdatasyncs it, in a loop until Until, and records each commit's
// latency, from the write's start to fdatasync's return (the system calls
// run in consecutive steps, a nanosecond apart when neither sleeps).
type WAL struct {
	Ino         int32
	Block       int64
	Until       kernel.Time
	Commits     Latencies
	off, done   int64
	phase       int
	commitStart kernel.Time
}

// WAL phases.
const (
	walStart = iota
	walWrite
	walSync
	walSynced
)

// Step implements kernel.Workload.
func (w *WAL) Step(k *kernel.Kernel, t *kernel.Task) bool {
	for {
		switch w.phase {
		case walStart:
			if t.Now() >= w.Until {
				return true
			}
			w.commitStart = t.Now()
			w.phase = walWrite
		case walWrite:
			w.done += k.Write(t, w.Ino, w.off+w.done, w.Block-w.done, w.Block, 1)
			if w.done == w.Block {
				w.off += w.Block
				w.done = 0
				w.phase = walSync
			}
			return false // one system call a step: the write may have slept
		case walSync:
			if !k.Fdatasync(t, w.Ino) {
				return false
			}
			// The kernel runs the task again once the call has
			// returned.
			w.phase = walSynced
			return false
		case walSynced:
			w.Commits = append(w.Commits, t.Now()-w.commitStart)
			w.phase = walStart
		}
	}
}
