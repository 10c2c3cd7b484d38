package daemon

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
)

// memcgd run executes itself again with GODEBUG's schedtrace set, which
// keeps the Go runtime's sysmon from the deep sleep whose every end
// resets its poll to 20 µs (cmd/memcgd/sysmon.go). The daemon's process,
// the same PID, runs with it once ready, beside the settings GODEBUG had;
// a schedtrace the environment sets stands.
func TestDaemonRunsWithSysmonKeptFromDeepSleep(t *testing.T) {
	l := cgrouptest.Layout(t)
	parent := cgrouptest.New(t, l, 0)
	d := newDaemon(t, managedConfig(parent.Path, "dirty_bytes: 64M, min_free_kbytes: 0"))
	d.start()
	defer d.stop()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", d.PID()))
	if err != nil {
		t.Fatal(err)
	}
	var godebug string // the first GODEBUG, the one the runtime reads
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("GODEBUG=")); ok {
			godebug = string(v)
			break
		}
	}
	want := "schedtrace=2147483647"
	for s := range strings.SplitSeq(os.Getenv("GODEBUG"), ",") {
		if strings.HasPrefix(s, "schedtrace=") {
			want = s // the operator's
		}
	}
	found := false
	for s := range strings.SplitSeq(godebug, ",") {
		found = found || s == want
	}
	if !found {
		t.Errorf("the daemon runs with GODEBUG %q, want %s among its settings", godebug, want)
	}
}
