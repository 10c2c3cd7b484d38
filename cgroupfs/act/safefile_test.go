package act_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/host"
)

// flipSlot is the descriptor the flipper process flips.
const flipSlot = 100

// TestFlipperProcess is not a test: run as a child with MEMCGD_FLIPPER set,
// it is a hostile tenant. It opens the regular file $MEMCGD_FLIP_FILE for
// writing and each path in $MEMCGD_FLIP_DEVICES with O_PATH (which opens
// nothing), creates $MEMCGD_FLIP_FILE.ready, and then forever dup2s the file and each
// device in turn into descriptor flipSlot, so that a listing that saw the
// slot as a file open for writing finds a device there when it reopens it.
func TestFlipperProcess(t *testing.T) {
	if os.Getenv("MEMCGD_FLIPPER") == "" {
		t.Skip("helper process for TestWriteOutNeverOpensADeviceSwappedIntoAListedSlot")
	}
	file, err := unix.Open(os.Getenv("MEMCGD_FLIP_FILE"), unix.O_WRONLY|unix.O_CREAT, 0o600)
	if err != nil {
		os.Exit(2)
	}
	if _, err := unix.Write(file, make([]byte, 1<<16)); err != nil {
		os.Exit(2)
	}
	fds := []int{file}
	for _, p := range filepath.SplitList(os.Getenv("MEMCGD_FLIP_DEVICES")) {
		fd, err := unix.Open(p, unix.O_PATH, 0)
		if err != nil {
			os.Exit(3)
		}
		fds = append(fds, fd, file)
	}
	if err := os.WriteFile(os.Getenv("MEMCGD_FLIP_FILE")+".ready", nil, 0o600); err != nil {
		os.Exit(4)
	}
	for i := 0; ; i++ {
		_ = unix.Dup3(fds[i%len(fds)], flipSlot, 0)
	}
}

// inotifyOpens counts the opens of paths (IN_OPEN) until stop is called.
func inotifyOpens(t *testing.T, paths ...string) (stop func() int) {
	t.Helper()
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if _, err := unix.InotifyAddWatch(in, p, unix.IN_OPEN); err != nil {
			t.Fatal(err)
		}
	}
	return func() int {
		defer unix.Close(in)
		n := 0
		buf := make([]byte, 64<<10)
		for {
			m, err := unix.Read(in, buf)
			if err == unix.EAGAIN {
				return n
			}
			if err != nil {
				t.Fatal(err)
			}
			for off := 0; off < m; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				if ev.Mask&unix.IN_OPEN != 0 {
					n++
				}
				if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
					t.Fatal("inotify queue overflowed: opens were lost")
				}
				off += unix.SizeofInotifyEvent + int(ev.Len)
			}
		}
	}
}

// issue 9, defect 2: a tenant that dup2s an O_PATH descriptor of a device
// (here a FIFO and a character device node, whose opens inotify sees)
// into a slot memcgd listed as a file open for writing must never make
// memcgd open the device, however the two race.
func TestWriteOutNeverOpensADeviceSwappedIntoAListedSlot(t *testing.T) {
	l := cgrouptest.Layout(t)
	dir := cgrouptest.DiskDir(t)
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	devices := []string{fifo}
	// A node of /dev/null's device: harmless to open, and inotify sees the
	// open, on a mount without nodev.
	null := filepath.Join(dir, "null")
	if err := unix.Mknod(null, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err == nil {
		devices = append(devices, null)
	} else {
		t.Logf("no character device node (%v): FIFO only", err)
	}
	c := cgrouptest.New(t, l, 0)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	startFlipper(t, c, self, filepath.Join(dir, "file"), devices)

	count := inotifyOpens(t, devices...)
	fs := cgroupfs.NewFS(l, "/proc", "/", nil)
	// Thousands of calls on a host; in the emulated VM, where a call
	// takes tens of milliseconds, as many as 20 s allow.
	const maxCalls, maxTime = 2000, 20 * time.Second
	files, calls := 0, 0
	for start := time.Now(); calls < maxCalls && time.Since(start) < maxTime; calls++ {
		w, err := fs.WriteOut(context.Background(), c.Path, c.Dirty(t))
		if err != nil {
			t.Fatalf("WriteOut: %v", err)
		}
		files += w.Files
	}
	opens := count()
	t.Logf("%d WriteOut calls while a tenant flips descriptor %d between a file and %d devices: %d device opens, %d write-outs of the file",
		calls, flipSlot, len(devices), opens, files)
	if opens != 0 {
		t.Errorf("memcgd opened a device %d times in %d WriteOut calls, want 0", opens, calls)
	}
	if files == 0 {
		t.Errorf("no write-out reached the regular file in %d calls: the test did not race", calls)
	}
}

// startFlipper starts TestFlipperProcess in c and waits until it flips.
func startFlipper(t *testing.T, c *cgrouptest.Cgroup, self, file string, devices []string) {
	t.Helper()
	t.Setenv("MEMCGD_FLIPPER", "1")
	t.Setenv("MEMCGD_FLIP_FILE", file)
	t.Setenv("MEMCGD_FLIP_DEVICES", strings.Join(devices, string(filepath.ListSeparator)))
	c.Start(t, self, "-test.run=^TestFlipperProcess$")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(file + ".ready"); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the flipper process did not start within 10s")
		}
	}
}

// issue 9, defect 4: files on filesystems memcgd may not touch are left
// alone. tmpfs stands in for FUSE and NFS here: it is on no allow-list,
// and a writer's file there must not be written out.
func TestWriteOutSkipsFilesOnFilesystemsNotAllowed(t *testing.T) {
	l := cgrouptest.Layout(t)
	shm := "/dev/shm"
	var st unix.Statfs_t
	if err := unix.Statfs(shm, &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		t.Skipf("%s is not tmpfs (%v)", shm, err)
	}
	tmp, err := os.MkdirTemp(shm, "memcgd-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	c := cgrouptest.New(t, l, 0)
	cgrouptest.StartWriter(t, c, filepath.Join(tmp, "f"), 1<<20)
	disk := cgrouptest.New(t, l, 0)
	cgrouptest.StartWriter(t, disk, filepath.Join(cgrouptest.DiskDir(t), "f"), 1<<20)
	fs := cgroupfs.NewFS(l, "/proc", "/", nil)
	for _, tt := range []struct {
		name string
		c    *cgrouptest.Cgroup
		want int
	}{{"writer on tmpfs", c, 0}, {"writer on a disk filesystem", disk, 1}} {
		w, err := fs.WriteOut(context.Background(), tt.c.Path, tt.c.Dirty(t))
		if err != nil {
			t.Fatalf("%s: WriteOut: %v", tt.name, err)
		}
		if w.Files != tt.want {
			t.Errorf("%s: WriteOut started %d files, want %d", tt.name, w.Files, tt.want)
		}
	}
}

// TestMapperProcess is not a test: run as a child with MEMCGD_MAPPER set to
// a path, it maps that file shared and writable, dirties 8 MiB of it
// through the mapping, closes its descriptor (the mapping alone keeps the
// file), creates PATH.ready and sleeps.
func TestMapperProcess(t *testing.T) {
	p := os.Getenv("MEMCGD_MAPPER")
	if p == "" {
		t.Skip("helper process for TestWriteOutReachesSharedWritableMappings")
	}
	const size = 8 << 20
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT, 0o600)
	if err != nil || unix.Ftruncate(fd, size) != nil {
		os.Exit(2)
	}
	m, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		os.Exit(3)
	}
	unix.Close(fd)
	for i := 0; i < size; i += 4096 {
		m[i] = 1
	}
	if err := os.WriteFile(p+".ready", nil, 0o600); err != nil {
		os.Exit(4)
	}
	time.Sleep(time.Hour)
}

// A file a task only has mapped shared and writable is reached through
// /proc/PID/map_files, checked as descriptors are, and written out.
func TestWriteOutReachesSharedWritableMappings(t *testing.T) {
	l := cgrouptest.Layout(t)
	dir := cgrouptest.DiskDir(t)
	c := cgrouptest.New(t, l, 0)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "mapped")
	t.Setenv("MEMCGD_MAPPER", file)
	c.Start(t, self, "-test.run=^TestMapperProcess$")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(file + ".ready"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the mapper process did not start within 10s")
		}
	}
	before := c.Dirty(t)
	// A write-out a step, every 10 ms, as for a throttled cgroup: each is
	// budgeted and goes on where the last one stopped.
	fs := cgroupfs.NewFS(l, "/proc", "/", nil)
	var (
		w     host.WriteOut
		after uint64
	)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		out, err := fs.WriteOut(context.Background(), c.Path, c.Dirty(t))
		if err != nil {
			t.Fatal(err)
		}
		w.Files = max(w.Files, out.Files)
		w.Bytes = max(w.Bytes, out.Bytes)
		if after = c.Dirty(t); after <= before/10 {
			break
		}
	}
	t.Logf("a mapping of 8 MiB dirtied through it: WriteOut %+v; dirty %.1f -> %.1f MiB", w, float64(before)/mib, float64(after)/mib)
	if w.Files != 1 {
		t.Errorf("WriteOut started %d files, want the mapped one", w.Files)
	}
	if before < 4*mib || after > before/10 {
		t.Errorf("dirty %d -> %d bytes, want about 8 MiB falling to at most a tenth", before, after)
	}
}
