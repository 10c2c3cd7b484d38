package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
)

// nobody is the user a non-root client runs as.
var nobody = &syscall.Credential{Uid: 65534, Gid: 65534}

// `memcgd set CGROUP dirty_bytes=32M` overrides the knob in the running
// daemon: `memcgd get` shows it as an override, with the threshold it
// gives; it persists across a restart; and a client that is not root can
// neither read nor change it, whether the socket's file mode stops it or,
// with the mode opened up, the daemon's own check of the peer's uid.
func TestDaemonSetGet(t *testing.T) {
	l := cgrouptest.Layout(t)
	parent := cgrouptest.New(t, l, 0)
	c := parent.Child(t, "app")
	d := newDaemon(t, managedConfig(parent.Path, "dirty_background_bytes: 8M, dirty_bytes: 64M, min_free_kbytes: 0"))
	d.start()

	check := func(when string) {
		t.Helper()
		s := d.get(c.Path)
		if fmt.Sprint(s.Knobs["dirty_bytes"]) != "33554432" || fmt.Sprint(s.Overrides["dirty_bytes"]) != "33554432" {
			t.Errorf("%s: memcgd get: dirty_bytes %v (override %v), want 33554432 set by memcgd set", when, s.Knobs["dirty_bytes"], s.Overrides["dirty_bytes"])
		}
		if s.Bytes["dirty_thresh"] != 32*mib {
			t.Errorf("%s: memcgd get: dirty_thresh %d, want %d", when, s.Bytes["dirty_thresh"], 32*mib)
		}
		if fmt.Sprint(s.Knobs["dirty_background_bytes"]) != "8388608" {
			t.Errorf("%s: memcgd get: dirty_background_bytes %v, want the config's 8388608", when, s.Knobs["dirty_background_bytes"])
		}
	}
	out, errOut, err := d.client(nil, "set", "--socket", d.Socket, string(c.Path), "dirty_bytes=32M")
	if err != nil {
		t.Fatalf("memcgd set %s dirty_bytes=32M: %v: %s", c.Path, err, errOut)
	}
	if !strings.Contains(out, "dirty_bytes 33554432 (override)") {
		t.Errorf("memcgd set printed %q, want a line \"dirty_bytes 33554432 (override)\"", out)
	}
	check("after set")
	if text, _, _ := d.client(nil, "get", "--socket", d.Socket, c.Dir); !strings.Contains(text, "dirty_bytes 33554432 (override)") {
		t.Errorf("memcgd get %s (the cgroupfs directory) printed %q, want a line \"dirty_bytes 33554432 (override)\"", c.Dir, text)
	}

	d.stop()
	d.start()
	check("after a restart")

	// Not root: refused by the socket's mode (0600 in a 0700 directory).
	for _, args := range [][]string{
		{"get", "--socket", d.Socket, string(c.Path)},
		{"set", "--socket", d.Socket, string(c.Path), "dirty_bytes=1G"},
	} {
		out, errOut, err := d.client(nobody, args...)
		if err == nil || !strings.Contains(errOut, "permission denied") {
			t.Errorf("memcgd %s as uid %d: %v, stdout %q, stderr %q; want it refused with permission denied",
				args[0], nobody.Uid, err, out, errOut)
		}
	}
	// Not root, with the socket's mode opened up: refused by the daemon,
	// which checks the peer's uid (SO_PEERCRED).
	if err := os.Chmod(d.Socket, 0o666); err != nil {
		t.Fatal(err)
	}
	for dir := filepath.Dir(d.Socket); dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"get", "--socket", d.Socket, string(c.Path)},
		{"set", "--socket", d.Socket, string(c.Path), "dirty_bytes=1G"},
	} {
		out, errOut, err := d.client(nobody, args...)
		if err == nil || !strings.Contains(errOut, "uid 65534") || !strings.Contains(errOut, "root only") {
			t.Errorf("memcgd %s as uid %d through an open socket: %v, stdout %q, stderr %q; want the daemon to refuse uid 65534",
				args[0], nobody.Uid, err, out, errOut)
		}
	}
	if line, ok := d.waitLog(0, readyTimeout, "refused a peer that is not root", "uid=65534"); !ok {
		t.Errorf("the daemon's log has no line refusing uid 65534")
	} else {
		t.Log(line)
	}
	check("after the refused clients")
}
