package smoke

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Filesystem magics (include/uapi/linux/magic.h).
const (
	cgroupSuperMagic  = 0x27e0eb
	cgroup2SuperMagic = 0x63677270
	tmpfsMagic        = 0x01021994
	ext4SuperMagic    = 0xef53
)

// inVM skips the test outside the VM and returns the cgroup version the VM
// was booted with.
func inVM(t *testing.T) string {
	t.Helper()
	if os.Getenv("MEMCGD_VM") != "1" {
		t.Skip("checks the test VM's setup: runs only inside it (MEMCGD_VM=1, see test/vm)")
	}
	return os.Getenv("MEMCGD_VM_CGROUP")
}

// A hierarchy is a cgroup mount the suite's tests rely on.
type hierarchy struct {
	mount string
	magic int64
	// key is the hierarchy's entry in /proc/self/cgroup: "" for cgroup2,
	// the controller list for v1.
	key string
	// own is where the test process sits in it.
	own string
	// has and hasNot are words that must (not) be in the root's files.
	has, hasNot map[string][]string
	// childFiles are files a new cgroup beneath the process's own has.
	childFiles []string
}

func TestCgroupLayout(t *testing.T) {
	version := inVM(t)
	// What test/vm/init.sh sets up, per cgroup version.
	layouts := map[string][]hierarchy{
		"v2": {{
			mount: "/sys/fs/cgroup", magic: cgroup2SuperMagic, key: "", own: "/",
			has: map[string][]string{
				"cgroup.controllers":     {"memory", "io"},
				"cgroup.subtree_control": {"memory", "io"},
			},
			childFiles: []string{
				"memory.current", "memory.max", "memory.high", "memory.stat", "memory.events",
				"memory.reclaim", "memory.pressure", "io.pressure", "io.max", "io.stat", "cgroup.freeze",
			},
		}},
		"v1": {
			{mount: "/sys/fs/cgroup", magic: tmpfsMagic},
			{
				mount: "/sys/fs/cgroup/memory", magic: cgroupSuperMagic, key: "memory", own: "/memcgd-vm",
				childFiles: []string{
					"memory.usage_in_bytes", "memory.limit_in_bytes", "memory.stat", "memory.failcnt",
					"memory.force_empty", "cgroup.event_control",
				},
			},
			{
				mount: "/sys/fs/cgroup/freezer", magic: cgroupSuperMagic, key: "freezer", own: "/",
				childFiles: []string{"freezer.state"},
			},
			{
				mount: "/sys/fs/cgroup/unified", magic: cgroup2SuperMagic, key: "", own: "/",
				hasNot:     map[string][]string{"cgroup.controllers": {"memory"}},
				childFiles: []string{"memory.pressure", "io.pressure", "cgroup.freeze"},
			},
		},
	}
	layout, ok := layouts[version]
	if !ok {
		t.Fatalf("MEMCGD_VM_CGROUP=%q: want v1 or v2", version)
	}
	self := procSelfCgroup(t)
	for _, h := range layout {
		t.Run(h.mount, func(t *testing.T) {
			var st syscall.Statfs_t
			if err := syscall.Statfs(h.mount, &st); err != nil {
				t.Fatalf("statfs %s: %v", h.mount, err)
			}
			if st.Type != h.magic {
				t.Fatalf("%s: filesystem magic %#x, want %#x", h.mount, st.Type, h.magic)
			}
			if h.childFiles == nil {
				return
			}
			if got, ok := self[h.key]; !ok || got != h.own {
				t.Fatalf("/proc/self/cgroup entry %q = %q (present %v), want %q", h.key, got, ok, h.own)
			}
			for file, words := range h.has {
				if got := fields(t, filepath.Join(h.mount, file)); !containsAll(got, words) {
					t.Errorf("%s/%s = %q, want it to contain %q", h.mount, file, got, words)
				}
			}
			for file, words := range h.hasNot {
				for _, w := range fields(t, filepath.Join(h.mount, file)) {
					if slices.Contains(words, w) {
						t.Errorf("%s/%s contains %q, want none of %q", h.mount, file, w, words)
					}
				}
			}
			child := filepath.Join(h.mount, h.own, fmt.Sprintf("memcgd-test-smoke-%d", os.Getpid()))
			if err := os.Mkdir(child, 0o755); err != nil {
				t.Fatalf("create cgroup: %v", err)
			}
			defer func() {
				if err := os.Remove(child); err != nil {
					t.Errorf("remove cgroup: %v", err)
				}
			}()
			for _, f := range h.childFiles {
				if _, err := os.Stat(filepath.Join(child, f)); err != nil {
					t.Errorf("new cgroup lacks %s: %v", f, err)
				}
			}
		})
	}
}

// TestTempDirOnDisk checks that test files land on the ext4 disk, where the
// page cache they make is reclaimable and written back, not in the
// initramfs's memory.
func TestTempDirOnDisk(t *testing.T) {
	inVM(t)
	dir := t.TempDir()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatalf("statfs %s: %v", dir, err)
	}
	if st.Type != ext4SuperMagic {
		t.Fatalf("t.TempDir() %s: filesystem magic %#x, want ext4 (%#x)", dir, st.Type, ext4SuperMagic)
	}
}

// TestDiskSlowerThanMemory checks the premise of the writeback tests: the
// VM's disk writes no faster than qemu's limit MEMCGD_VM_WRITE_BPS (with a
// quarter of slack for qemu's token bucket), and slower than a writer fills
// the page cache, so dirty pages build up faster than they are written back.
//
// How fast the page cache fills is the emulated CPU's speed, which the
// host's other load takes from (once 52.8 MB/s against the disk's 54.1 on a
// loaded host; 81.6 MB/s on a quiet one, and 43.7 to 51.7 MB/s in three
// rounds in a row within 6 s in a CI run on a shared host): a round whose
// writer was that slow is measured again after a pause, up to fillRounds in
// all, about half a minute, so that a slow spell of the host passes. The
// disk's limit is checked in every round.
func TestDiskSlowerThanMemory(t *testing.T) {
	inVM(t)
	limit, err := strconv.ParseFloat(os.Getenv("MEMCGD_VM_WRITE_BPS"), 64)
	if err != nil {
		t.Fatalf("MEMCGD_VM_WRITE_BPS=%q: %v", os.Getenv("MEMCGD_VM_WRITE_BPS"), err)
	}
	if limit == 0 {
		t.Skip("the VM's disk is not throttled (MEMCGD_VM_WRITE_BPS=0)")
	}
	const fillRounds = 8
	var memRate, diskRate float64
	for round := 1; round <= fillRounds; round++ {
		if round > 1 {
			time.Sleep(2 * time.Second)
		}
		memRate, diskRate = fillAndSync(t)
		t.Logf("round %d: %d MiB: page cache filled at %.1f MB/s, written back at %.1f MB/s, limit %.1f MB/s",
			round, fillSize>>20, memRate/1e6, diskRate/1e6, limit/1e6)
		if diskRate > 1.25*limit {
			t.Errorf("round %d: disk wrote back at %.1f MB/s, want at most 1.25 x the limit %.1f MB/s", round, diskRate/1e6, limit/1e6)
		}
		if diskRate < memRate {
			return
		}
	}
	t.Errorf("disk wrote back at %.1f MB/s, page cache filled at %.1f MB/s in the last of %d rounds: want the disk slower",
		diskRate/1e6, memRate/1e6, fillRounds)
}

// fillSize is below the VM's dirty background threshold (10% of about
// 900 MB), so no writeback starts before the fsync and the two phases are
// apart.
const fillSize = 48 << 20

// fillAndSync writes fillSize bytes to a new file, then fsyncs it, and
// returns the rates of both phases in bytes a second.
func fillAndSync(t *testing.T) (memRate, diskRate float64) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	start := time.Now()
	for written := 0; written < fillSize; written += len(buf) {
		if _, err := f.Write(buf); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	dirtied := time.Now()
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync: %v", err)
	}
	return fillSize / dirtied.Sub(start).Seconds(), fillSize / time.Since(dirtied).Seconds()
}

// TestLoopbackUp checks that a test can serve and scrape HTTP on
// 127.0.0.1, as the daemon's metrics tests do: the kernel creates lo down,
// and init.sh brings it up.
func TestLoopbackUp(t *testing.T) {
	inVM(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.1: %v", err)
	}
	defer ln.Close()
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, err = c.Write([]byte("ok"))
			c.Close()
		}
		accepted <- err
	}()
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v (is lo up? see test/vm/init.sh)", ln.Addr(), err)
	}
	defer c.Close()
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read from %s: %v", ln.Addr(), err)
	}
	if err := <-accepted; err != nil {
		t.Fatalf("accept on %s: %v", ln.Addr(), err)
	}
	if string(got) != "ok" {
		t.Errorf("read %q from %s, want %q", got, ln.Addr(), "ok")
	}
}

// procSelfCgroup reads /proc/self/cgroup into hierarchy key -> path, the key
// being the controller list of a v1 hierarchy or "" for cgroup2.
func procSelfCgroup(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := make(map[string]string)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path (kernel/cgroup/cgroup.c: proc_cgroup_show)
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			t.Fatalf("/proc/self/cgroup: malformed line %q", sc.Text())
		}
		m[parts[1]] = parts[2]
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

func fields(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
