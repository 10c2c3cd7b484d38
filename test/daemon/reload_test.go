package daemon

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
)

// SIGHUP reloads the config file. A file that does not load is refused
// with a log line naming the field and the value, and the daemon keeps
// running with the config it had: its stat still shows the old
// thresholds. A good file takes effect: the new thresholds show.
func TestDaemonReloadKeepsConfigOnError(t *testing.T) {
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
			refused: []string{"line 3", "defaults.dirty_expire_centisecs", "allowed a knob named"}},
		{name: "out of range", defaults: "dirty_background_ratio: 150, dirty_bytes: 16M",
			refused: []string{"line 3", "defaults.dirty_background_ratio", "150", "from 0 to 100"}},
		{name: "good", defaults: "dirty_background_bytes: 4M, dirty_bytes: 16M, min_free_kbytes: 0",
			ok: true, background: 4 * mib},
	}
	d := newDaemon(t, managedConfig(parent.Path, tests[0].defaults))
	d.start()
	want := uint64(0)
	for i, tt := range tests {
		if i > 0 {
			from := len(d.logText())
			d.setConfig(managedConfig(parent.Path, tt.defaults))
			d.signal(syscall.SIGHUP)
			if tt.ok {
				if _, ok := d.waitLog(from, within, "config reloaded"); !ok {
					t.Fatalf("%s: no \"config reloaded\" in the log %v after SIGHUP", tt.name, within)
				}
			} else {
				line, ok := d.waitLog(from, within, "config reload refused")
				if !ok {
					t.Fatalf("%s: no \"config reload refused\" in the log %v after SIGHUP", tt.name, within)
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
		if !d.running() {
			t.Fatalf("%s: memcgd exited: %v", tt.name, d.err)
		}
	}
}
