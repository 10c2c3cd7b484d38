package act_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/act"
	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
)

// On the real kernel, fdatasyncs on a device with a volatile write cache
// make it syncing: each asks for a cache flush, which the device's stat
// file counts. A device that does not cache writes is asked for none, and
// is never syncing.
func TestSyncersSeeFdatasyncsOnTheRealDevice(t *testing.T) {
	dir := cgrouptest.DiskDir(t)
	f, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if unix.Major(st.Dev) == 0 {
		t.Skipf("%s is on no block device (%d:%d)", dir, unix.Major(st.Dev), unix.Minor(st.Dev))
	}
	cache := writeCache(t, st.Dev)
	s := act.NewSyncers("/sys")
	s.Syncing(st.Dev) // the first reading
	syncing := false
	buf := make([]byte, 4096)
	for deadline := time.Now().Add(time.Second); !syncing && time.Now().Before(deadline); {
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			t.Fatal(err)
		}
		syncing = s.Syncing(st.Dev)
	}
	t.Logf("device %d:%d, write cache %q: syncing %v", unix.Major(st.Dev), unix.Minor(st.Dev), cache, syncing)
	if want := cache == "write back"; syncing != want {
		t.Errorf("after a second of fdatasyncs: syncing %v, want %v (write cache %q)", syncing, want, cache)
	}
}

// writeCache is the queue's write_cache of the block device dev, or of
// the disk a partition is on.
func writeCache(t *testing.T, dev uint64) string {
	t.Helper()
	d := fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(dev), unix.Minor(dev))
	for _, p := range []string{filepath.Join(d, "queue", "write_cache"), filepath.Join(d, "..", "queue", "write_cache")} {
		if b, err := os.ReadFile(p); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	t.Fatalf("no queue/write_cache for %s", d)
	return ""
}
