package daemon

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/control"
)

// SIGHUP reloads the config file, and so does a change of its content
// (an atomic replacement, as kubelet and editors make). A file that does
// not load is refused with a log line naming the field and the value, and
// the daemon keeps running with the config it had: its stat still shows
// the old thresholds. A good file takes effect: the new thresholds show.
func TestDaemonReloadKeepsConfigOnError(t *testing.T) {
	for _, trigger := range []struct {
		name  string
		flags []string
		// reload puts cfg in the file and has the daemon reload it.
		reload func(d *daemon, cfg string)
		logs   string // the trigger's word in the reload's log line
	}{
		// With no reread of the file, SIGHUP alone reloads.
		{"SIGHUP", []string{"--config-check-interval", "0"},
			func(d *daemon, cfg string) { d.setConfig(cfg); d.signal(syscall.SIGHUP) }, "trigger=SIGHUP"},
		{"file changed", []string{"--config-check-interval", "100ms"},
			func(d *daemon, cfg string) { d.replaceConfig(cfg) }, `trigger="config file changed"`},
	} {
		t.Run(trigger.name, func(t *testing.T) {
			testReload(t, trigger.flags, trigger.reload, trigger.logs)
		})
	}
}

func testReload(t *testing.T, flags []string, reload func(d *daemon, cfg string), logs string) {
	l := cgrouptest.Layout(t)
	within := 5 * time.Second * slow()
	parent := cgrouptest.New(t, l, 0)
	c := parent.Child(t, "app")

	tests := []struct {
		name     string
		defaults string
		// ok says the reload is accepted; then background is the
		// dirty_background_thresh it gives. Otherwise refused names what
		// the refusal's log line must contain.
		ok         bool
		background uint64
		refused    []string
	}{
		{name: "start", defaults: "dirty_background_bytes: 8M, dirty_bytes: 16M, min_free_kbytes: 0",
			ok: true, background: 8 * mib},
		{name: "bad value", defaults: "dirty_background_bytes: 4M, dirty_bytes: 16M, writeback_first: maybe",
			refused: []string{"line 3", "defaults.writeback_first", "maybe", "allowed true or false"}},
		{name: "unknown key", defaults: "dirty_background_bytes: 4M, dirty_bytes: 16M, dirty_expire_centisecs: 3000",
			refused: []string{"line 3", `defaults: unknown knob \"dirty_expire_centisecs\"`, "allowed dirty_ratio, dirty_bytes"}},
		{name: "out of range", defaults: "dirty_background_ratio: 150, dirty_bytes: 16M",
			refused: []string{"line 3", "defaults.dirty_background_ratio", "150", "from 0 to 100"}},
		{name: "good", defaults: "dirty_background_bytes: 4M, dirty_bytes: 16M, min_free_kbytes: 0",
			ok: true, background: 4 * mib},
	}
	d := newDaemon(t, managedConfig(parent.Path, tests[0].defaults), flags...)
	d.start()
	want := uint64(0)
	for i, tt := range tests {
		if i > 0 {
			from := len(d.logText())
			reload(d, managedConfig(parent.Path, tt.defaults))
			if tt.ok {
				if _, ok := d.waitLog(from, within, "config reloaded", logs); !ok {
					t.Fatalf("%s: no \"config reloaded\" with %s in the log %v after the change", tt.name, logs, within)
				}
			} else {
				line, ok := d.waitLog(from, within, "config reload refused", logs)
				if !ok {
					t.Fatalf("%s: no \"config reload refused\" with %s in the log %v after the change", tt.name, logs, within)
				}
				for _, w := range tt.refused {
					if !strings.Contains(line, w) {
						t.Errorf("%s: the refusal %q does not name %s", tt.name, line, w)
					}
				}
				t.Logf("%s: %s", tt.name, line)
			}
		}
		if tt.ok {
			want = tt.background
		}
		var got uint64
		if _, ok := poll(within, 50*time.Millisecond, func() bool {
			got = d.stat(c.Path)["dirty_background_thresh"]
			return got == want
		}); !ok {
			t.Errorf("%s: memcgd stat: dirty_background_thresh %d, want %d within %v (memcgd get: %d)",
				tt.name, got, want, within, d.get(c.Path).Bytes["dirty_background_thresh"])
		}
		if !d.Running() {
			t.Fatalf("%s: memcgd exited: %v", tt.name, d.ExitErr())
		}
	}
}

// Issue 9, defect 11: a reload that changes manage.under is refused, with
// a log line naming the field and both values, and the daemon keeps its
// subtree: the managed set is what it was, not the new subtree.
func TestDaemonRefusesReloadOfManagedSubtree(t *testing.T) {
	l := cgrouptest.Layout(t)
	within := 5 * time.Second * slow()
	parent := cgrouptest.New(t, l, 0)
	kept := parent.Child(t, "kept")
	asked := parent.Child(t, "asked")
	knobs := "dirty_background_bytes: 8M, dirty_bytes: 16M, min_free_kbytes: 0"
	// SIGHUP alone reloads: no reread of the file races it.
	d := newDaemon(t, managedConfig(kept.Path, knobs), "--config-check-interval", "0")
	d.start()

	from := len(d.logText())
	d.setConfig(managedConfig(asked.Path, knobs))
	d.signal(syscall.SIGHUP)
	line, ok := d.waitLog(from, within, "config reload")
	if !ok {
		t.Fatalf("no \"config reload\" line in the log %v after SIGHUP", within)
	}
	t.Log(line)
	for _, w := range []string{"config reload refused", "manage.under", string(kept.Path), string(asked.Path)} {
		if !strings.Contains(line, w) {
			t.Errorf("the reload's log line does not say %q", w)
		}
	}
	if n, err := d.managedCount(); err != nil || n != 1 {
		t.Errorf("the daemon reports %d cgroups (%v), want 1: %s alone", n, err, kept.Path)
	}
	if _, err := d.tryStat(kept.Path); err != nil {
		t.Errorf("%s, the running subtree, is no longer managed: %v", kept.Path, err)
	}
	if _, err := d.tryStat(asked.Path); err == nil {
		t.Errorf("%s, the refused subtree, is managed", asked.Path)
	}
	if !d.Running() {
		t.Fatalf("memcgd exited: %v", d.ExitErr())
	}
	d.stop()
}

// Issue 9, defect 11: a SIGHUP that comes while the daemon starts (here,
// as soon as it opens its config file) does not kill it: it reloads once
// it runs.
func TestDaemonSurvivesSIGHUPWhileStarting(t *testing.T) {
	l := cgrouptest.Layout(t)
	within := 5 * time.Second * slow()
	parent := cgrouptest.New(t, l, 0)
	d := newDaemon(t, managedConfig(parent.Path, "dirty_background_bytes: 8M, dirty_bytes: 16M, min_free_kbytes: 0"))

	// inotify tells when the daemon opens its config file, which it reads
	// before anything else it needs to start.
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	in := os.NewFile(uintptr(fd), "inotify")
	defer in.Close()
	if _, err := unix.InotifyAddWatch(fd, d.Config, unix.IN_OPEN); err != nil {
		t.Fatal(err)
	}
	d.launch()
	if err := in.SetReadDeadline(time.Now().Add(readyTimeout)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	if _, err := in.Read(buf); err != nil {
		t.Fatalf("no open of %s by the daemon: %v", d.Config, err)
	}
	d.signal(syscall.SIGHUP)
	if _, ok := poll(within, 5*time.Millisecond, func() bool {
		c, err := control.Dial(d.Socket)
		if err == nil {
			c.Close()
		}
		return err == nil || !d.Running()
	}); !ok || !d.Running() {
		<-d.Exited()
		t.Fatalf("memcgd, sent SIGHUP as it opened its config, did not start: %v", d.ExitErr())
	}
	if _, ok := d.waitLog(0, within, "config reloaded"); !ok {
		t.Errorf("memcgd, sent SIGHUP as it started, logged no \"config reloaded\" within %v", within)
	}
	d.stop()
}
