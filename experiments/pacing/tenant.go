package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The tenant is the workload: this binary re-executed with "tenant" as its
// first argument, inside the tenant's cgroups. It stands for a dd-like
// dirtier with neighbours in its own process: a writer thread that
// write(2)s 1 MiB buffers into the page cache (optionally read first from
// /dev/zero or from a pipe, counting short reads), a sleeper thread that
// sleeps 1 ms at a time and records how late it wakes, a feeder thread
// that keeps the pipe full, and an aux thread for mmap writes. Each runs
// on an OS thread of its own (runtime.LockOSThread), so that the pacer
// can move exactly the writer's TID; the parent runs it with GOGC=off and
// GODEBUG=asyncpreemptoff=1, so that no stop-the-world waits for a paced
// thread and no runtime signal makes a read return early.
//
// Protocol, one line each way: the tenant prints its ready line (JSON
// tenantReady), then serves commands from stdin, answering each with one
// JSON line:
//
//	stream     start the writer's loop (and the sleeper's); answer {}
//	stop       stop both loops; answer tenantResult
//	write N    the writer write(2)s N bytes at the end of its file
//	mmap N     the aux thread stores into N bytes of a fresh shared mapping
//	remap      the aux thread stores into the same mapping again
//	fsync      fsync both files
//	truncate   truncate both files to 0 (the writer's offset back to 0)
//	fork       the writer forks and execs "sleep 3600"; answer {"pid":N}
//
// It exits at the end of its input.

// tenantReady is the tenant's first line: its PID and its threads' TIDs.
type tenantReady struct {
	PID     int `json:"pid"`
	Writer  int `json:"writer"`
	Sleeper int `json:"sleeper,omitempty"`
	Feeder  int `json:"feeder,omitempty"`
	Aux     int `json:"aux"`
}

// tenantResult is what "stop" answers.
type tenantResult struct {
	// Bytes and Writes are what the writer wrote in its loop.
	Bytes  uint64 `json:"bytes"`
	Writes uint64 `json:"writes"`
	// Reads counts the reads from the source. PartialReads returned less
	// than they asked for; ShortReads returned less than was there to be
	// read: for /dev/zero, less than asked; for a pipe, less than
	// FIONREAD said the pipe held just before (a pipe read may return
	// what it has, which is no short read).
	Reads        uint64 `json:"reads"`
	PartialReads uint64 `json:"partial_reads"`
	ShortReads   uint64 `json:"short_reads"`
	ShortWrites  uint64 `json:"short_writes"`
	// Stamps are the times, in ns since the loop began, at which the
	// writer's first writes returned.
	Stamps []int64 `json:"stamps,omitempty"`
	// Lateness is, per 1 ms sleep of the sleeper, how late it woke, ns.
	Lateness []int64 `json:"lateness,omitempty"`
	// Elapsed is the loop's duration, ns.
	Elapsed int64 `json:"elapsed"`
}

// tenantConfig is the tenant's command line.
type tenantConfig struct {
	file    string
	src     string
	chunk   int
	cap     int64
	rate    float64
	sleeper bool
	idle    bool // stream runs the sleeper only
	stamps  int
	samples int
}

func (c tenantConfig) args() []string {
	a := []string{"tenant", "-file", c.file, "-src", c.src, "-chunk", strconv.Itoa(c.chunk),
		"-cap", strconv.FormatInt(c.cap, 10), "-rate", strconv.FormatFloat(c.rate, 'f', 0, 64),
		"-stamps", strconv.Itoa(c.stamps), "-samples", strconv.Itoa(c.samples)}
	if c.sleeper {
		a = append(a, "-sleeper")
	}
	if c.idle {
		a = append(a, "-idle")
	}
	return a
}

// sources of the writer's data.
const (
	srcNone = "none" // write the buffer as it is
	srcZero = "zero" // read(2) it from /dev/zero first
	srcPipe = "pipe" // read(2) it from a pipe the feeder keeps full
)

func tenantMain(args []string) error {
	fs := flag.NewFlagSet("tenant", flag.ContinueOnError)
	var c tenantConfig
	fs.StringVar(&c.file, "file", "", "file to write (required)")
	fs.StringVar(&c.src, "src", srcNone, "source of the data: none, zero or pipe")
	fs.IntVar(&c.chunk, "chunk", 1<<20, "bytes per read and write")
	fs.Int64Var(&c.cap, "cap", 0, "truncate the file to 0 whenever the loop has written this many bytes into it (0: never)")
	fs.Float64Var(&c.rate, "rate", 0, "pace the writer itself to this many bytes per second, sleeping in user space (0: unpaced)")
	fs.BoolVar(&c.sleeper, "sleeper", false, "run the 1 ms sleeper thread beside the writer")
	fs.BoolVar(&c.idle, "idle", false, "stream runs the sleeper only, the writer stays idle")
	fs.IntVar(&c.stamps, "stamps", 0, "record the return times of this many first writes")
	fs.IntVar(&c.samples, "samples", 100000, "most sleeper samples kept")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.file == "" {
		return fmt.Errorf("-file: missing: want the path of a file to create")
	}
	if c.src != srcNone && c.src != srcZero && c.src != srcPipe {
		return fmt.Errorf("-src: invalid value %q: want none, zero or pipe", c.src)
	}
	if c.chunk < 1 {
		return fmt.Errorf("-chunk: invalid value %d: want at least 1", c.chunk)
	}
	debug.SetGCPercent(-1)
	// The main goroutine keeps the main thread, the thread group's
	// leader, so that no worker is the leader: /proc/PID/cgroup then
	// tells the process's cgroup, not the writer's.
	runtime.LockOSThread()
	t, err := newTenant(c)
	if err != nil {
		return err
	}
	return t.serve(os.Stdin, os.Stdout)
}

// tenant is the running workload. The writer's and aux's fields are
// owned by their threads while a command or the loop runs; the main
// goroutine touches them only between commands.
type tenant struct {
	c           tenantConfig
	fd, mfd     int // the writer's file; the aux thread's mapped file
	srcFD       int // /dev/zero or the pipe's read end; -1 for none
	pipeW       int // the pipe's write end, -1 without a pipe
	buf         []byte
	mapping     []byte
	writer, aux *worker
	stop        atomic.Bool
	loop        sync.WaitGroup
	ready       tenantReady
	res         tenantResult
	// starts release the sleeper and the feeder when the loop starts.
	starts []chan struct{}
	// lateness is the sleeper's, read by the main goroutine at stop.
	lateMu   sync.Mutex
	lateness []int64
}

// worker runs functions on one locked OS thread.
type worker struct {
	jobs chan func()
	tid  int
}

func startWorker() *worker {
	w := &worker{jobs: make(chan func())}
	tid := make(chan int)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the process
		tid <- unix.Gettid()
		for f := range w.jobs {
			f()
		}
	}()
	w.tid = <-tid
	return w
}

// do runs f on the worker's thread and waits for it.
func (w *worker) do(f func()) {
	done := make(chan struct{})
	w.jobs <- func() { f(); close(done) }
	<-done
}

func newTenant(c tenantConfig) (*tenant, error) {
	t := &tenant{c: c, srcFD: -1, pipeW: -1, buf: make([]byte, c.chunk)}
	var err error
	if t.fd, err = unix.Open(c.file, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644); err != nil {
		return nil, fmt.Errorf("open %s: %w", c.file, err)
	}
	if t.mfd, err = unix.Open(c.file+".mmap", unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644); err != nil {
		return nil, fmt.Errorf("open %s.mmap: %w", c.file, err)
	}
	switch c.src {
	case srcZero:
		if t.srcFD, err = unix.Open("/dev/zero", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			return nil, fmt.Errorf("open /dev/zero: %w", err)
		}
	case srcPipe:
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			return nil, fmt.Errorf("pipe: %w", err)
		}
		t.srcFD, t.pipeW = p[0], p[1]
		// A pipe as large as one read, so that a full pipe holds a
		// whole buffer (fs/pipe.c pipe_set_size; at most
		// /proc/sys/fs/pipe-max-size, 1 MiB by default).
		if _, err := unix.FcntlInt(uintptr(t.pipeW), unix.F_SETPIPE_SZ, c.chunk); err != nil {
			return nil, fmt.Errorf("F_SETPIPE_SZ %d: %w", c.chunk, err)
		}
	}
	t.writer = startWorker()
	t.aux = startWorker()
	t.ready = tenantReady{PID: os.Getpid(), Writer: t.writer.tid, Aux: t.aux.tid}
	if c.sleeper {
		t.lateness = make([]int64, 0, c.samples)
		t.ready.Sleeper = t.startLocked(t.sleep)
	}
	if t.pipeW >= 0 {
		t.ready.Feeder = t.startLocked(t.feed)
	}
	if c.stamps > 0 {
		t.res.Stamps = make([]int64, 0, c.stamps)
	}
	return t, nil
}

// startLocked starts f on an OS thread of its own and returns the
// thread's TID; f waits for the loop to start.
func (t *tenant) startLocked(f func(start <-chan struct{})) int {
	tid := make(chan int)
	start := make(chan struct{})
	t.starts = append(t.starts, start)
	go func() {
		runtime.LockOSThread()
		tid <- unix.Gettid()
		f(start)
	}()
	return <-tid
}

func (t *tenant) serve(in io.Reader, out io.Writer) error {
	enc := json.NewEncoder(out)
	if err := enc.Encode(t.ready); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		ans, err := t.command(f)
		if err != nil {
			ans = map[string]string{"error": err.Error()}
		}
		if err := enc.Encode(ans); err != nil {
			return err
		}
	}
	return sc.Err()
}

func (t *tenant) command(f []string) (any, error) {
	size := func() (int64, error) {
		if len(f) != 2 {
			return 0, fmt.Errorf("%s: want one byte count", f[0])
		}
		return strconv.ParseInt(f[1], 10, 64)
	}
	switch f[0] {
	case "stream":
		if !t.c.idle {
			t.loop.Add(1)
			t.writer.jobs <- func() { defer t.loop.Done(); t.stream() }
		}
		for _, s := range t.starts {
			close(s)
		}
		t.starts = nil
		return struct{}{}, nil
	case "stop":
		t.stop.Store(true)
		t.loop.Wait()
		t.res.Lateness = t.lateSnapshot()
		return t.res, nil
	case "write":
		n, err := size()
		if err != nil {
			return nil, err
		}
		t.writer.do(func() { err = writeN(t.fd, t.buf, n) })
		return struct{}{}, err
	case "mmap", "remap":
		n, err := size()
		if err != nil {
			return nil, err
		}
		t.aux.do(func() { err = t.mmapWrite(f[0] == "mmap", n) })
		return struct{}{}, err
	case "fsync":
		if err := unix.Fsync(t.fd); err != nil {
			return nil, fmt.Errorf("fsync: %w", err)
		}
		return struct{}{}, unix.Fsync(t.mfd)
	case "truncate":
		if t.mapping != nil {
			if err := unix.Munmap(t.mapping); err != nil {
				return nil, err
			}
			t.mapping = nil
		}
		if err := unix.Ftruncate(t.fd, 0); err != nil {
			return nil, err
		}
		if _, err := unix.Seek(t.fd, 0, io.SeekStart); err != nil {
			return nil, err
		}
		return struct{}{}, unix.Ftruncate(t.mfd, 0)
	case "fork":
		var pid int
		var err error
		t.writer.do(func() {
			// os/exec forks on the calling thread, the writer's: the
			// child starts in the writer's cgroups.
			cmd := exec.Command("sleep", "3600")
			if err = cmd.Start(); err == nil {
				pid = cmd.Process.Pid
				go cmd.Wait() //nolint:errcheck // reaped whenever it ends
			}
		})
		return map[string]int{"pid": pid}, err
	}
	return nil, fmt.Errorf("unknown command %q", f[0])
}

// stream is the writer's loop, run on its thread until stop.
func (t *tenant) stream() {
	start := time.Now()
	var inFile int64
	next := start
	for !t.stop.Load() {
		n := len(t.buf)
		switch t.c.src {
		case srcZero:
			r, err := unix.Read(t.srcFD, t.buf)
			t.res.Reads++
			if err != nil || r < 0 {
				r = 0
			}
			if r < len(t.buf) {
				t.res.PartialReads++
				t.res.ShortReads++
			}
			n = r
		case srcPipe:
			avail, _ := unix.IoctlGetInt(t.srcFD, unix.TIOCINQ)
			r, err := unix.Read(t.srcFD, t.buf)
			t.res.Reads++
			if err != nil || r < 0 {
				r = 0
			}
			if r < len(t.buf) {
				t.res.PartialReads++
			}
			if r < min(avail, len(t.buf)) {
				t.res.ShortReads++
			}
			n = r
		}
		if t.c.rate > 0 {
			// Pacing slept off in user space, the control for a writer
			// paced without the scheduler: each write is due at the
			// rate's schedule, and a writer late by a sleep's overshoot
			// catches up, by at most selfPaceCredit.
			next = next.Add(time.Duration(float64(n) / t.c.rate * float64(time.Second)))
			now := time.Now()
			if d := next.Sub(now); d > 0 {
				ts := unix.NsecToTimespec(d.Nanoseconds())
				_ = unix.Nanosleep(&ts, nil)
			} else if -d > selfPaceCredit {
				next = now.Add(-selfPaceCredit)
			}
		}
		w, err := unix.Write(t.fd, t.buf[:n])
		if err != nil || w < n {
			t.res.ShortWrites++
		}
		if w > 0 {
			t.res.Bytes += uint64(w)
			inFile += int64(w)
		}
		t.res.Writes++
		if len(t.res.Stamps) < cap(t.res.Stamps) {
			t.res.Stamps = append(t.res.Stamps, time.Since(start).Nanoseconds())
		}
		if t.c.cap > 0 && inFile >= t.c.cap {
			_ = unix.Ftruncate(t.fd, 0)
			_, _ = unix.Seek(t.fd, 0, io.SeekStart)
			inFile = 0
		}
	}
	t.res.Elapsed = time.Since(start).Nanoseconds()
}

// selfPaceCredit bounds how far a self-paced writer catches up.
const selfPaceCredit = 100 * time.Millisecond

// sleep is the sleeper's loop: 1 ms sleeps, each one's lateness kept.
func (t *tenant) sleep(start <-chan struct{}) {
	<-start
	const nap = time.Millisecond
	for !t.stop.Load() {
		t0 := time.Now()
		ts := unix.NsecToTimespec(nap.Nanoseconds())
		_ = unix.Nanosleep(&ts, nil)
		late := time.Since(t0) - nap
		t.lateMu.Lock()
		if len(t.lateness) < cap(t.lateness) {
			t.lateness = append(t.lateness, late.Nanoseconds())
		}
		t.lateMu.Unlock()
	}
}

func (t *tenant) lateSnapshot() []int64 {
	t.lateMu.Lock()
	defer t.lateMu.Unlock()
	return append([]int64(nil), t.lateness...)
}

// feed keeps the pipe full until the process ends.
func (t *tenant) feed(start <-chan struct{}) {
	<-start
	buf := make([]byte, t.c.chunk)
	for {
		if _, err := unix.Write(t.pipeW, buf); err != nil {
			return
		}
	}
}

// mmapWrite stores one byte into each page of n bytes of the aux file
// through a shared mapping: a fresh mapping of a file grown to n, or the
// existing one again.
func (t *tenant) mmapWrite(fresh bool, n int64) error {
	if fresh || t.mapping == nil {
		if t.mapping != nil {
			if err := unix.Munmap(t.mapping); err != nil {
				return err
			}
		}
		if err := unix.Ftruncate(t.mfd, n); err != nil {
			return fmt.Errorf("ftruncate: %w", err)
		}
		m, err := unix.Mmap(t.mfd, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			return fmt.Errorf("mmap: %w", err)
		}
		t.mapping = m
	}
	page := os.Getpagesize()
	for i := 0; i < len(t.mapping); i += page {
		t.mapping[i]++
	}
	return nil
}

// writeN write(2)s n bytes from buf, a buffer at a time.
func writeN(fd int, buf []byte, n int64) error {
	for n > 0 {
		k := min(int64(len(buf)), n)
		w, err := unix.Write(fd, buf[:k])
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
		n -= int64(w)
	}
	return nil
}
