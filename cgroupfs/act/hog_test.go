package act_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"golang.org/x/sys/unix"
)

// The anonymous-memory hog: the test binary run again inside a test
// cgroup, as the helper test below, holding hogEnvSize bytes of anonymous
// memory, and with hogEnvChurn set also unmapping and mapping again a 2 MiB
// part of it without pause, so that it charges pages all the time.
const (
	hogEnvSize  = "MEMCGD_TEST_HOG_BYTES"
	hogEnvChurn = "MEMCGD_TEST_HOG_CHURN"
	hogChurn    = 2 << 20
)

// TestHelperAnonHog is not a test: it is the hog process (see startHog).
func TestHelperAnonHog(t *testing.T) {
	v := os.Getenv(hogEnvSize)
	if v == "" {
		t.Skip("the anonymous-memory hog of the reclaim tests; runs only as their child")
	}
	size, err := strconv.Atoi(v)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	touch(mem)
	if os.Getenv(hogEnvChurn) == "" {
		time.Sleep(time.Hour)
		return
	}
	for {
		churn, err := unix.Mmap(-1, 0, hogChurn, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			t.Fatal(err)
		}
		touch(churn)
		if err := unix.Munmap(churn); err != nil {
			t.Fatal(err)
		}
	}
}

func touch(b []byte) {
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
}

// startHog starts the hog in c holding size bytes of anonymous memory
// (plus the churning 2 MiB if churn is set), and returns its pid once the
// cgroup's anonymous memory reached size.
func startHog(t *testing.T, c *cgrouptest.Cgroup, size uint64, churn bool) int {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(hogEnvSize, strconv.FormatUint(size, 10))
	if churn {
		t.Setenv(hogEnvChurn, "1")
	}
	cmd := c.Start(t, exe, "-test.run=^TestHelperAnonHog$")
	os.Unsetenv(hogEnvSize)
	os.Unsetenv(hogEnvChurn)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if anon := statValue(t, c, "anon"); anon >= size {
			return cmd.Process.Pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("hog in %s: anonymous memory %d bytes after 30 s, want %d", c.Path, statValue(t, c, "anon"), size)
		}
	}
}

// statValue reads key of c's memory.stat: "anon" is v2's anon and v1's
// rss; other keys are read as named.
func statValue(t *testing.T, c *cgrouptest.Cgroup, key string) uint64 {
	t.Helper()
	st := cgrouptest.StatFile(t, c.Dir)
	if v, ok := st[key]; ok {
		return v
	}
	if key == "anon" {
		return st["rss"]
	}
	t.Fatalf("%s/memory.stat has no %s", c.Dir, key)
	return 0
}
