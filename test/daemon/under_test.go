package daemon

import (
	"errors"
	"os/exec"
	"path"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memcgd/memcgd/cgroupfs/cgrouptest"
	"github.com/memcgd/memcgd/host"
)

// A manage.under that does not exist, as /kubepods on a node whose kubelet
// uses the systemd cgroup driver (/kubepods.slice), is refused at start
// with exit status 1 and at SIGHUP with the running config kept: the
// refusal names the field, the value and the cgroup that does exist.
// Without the check the daemon started, found nothing to manage and idled
// as if all were well.
func TestDaemonRefusesMissingManagedSubtree(t *testing.T) {
	l := cgrouptest.Layout(t)
	within := 5 * time.Second * slow()
	parent := cgrouptest.New(t, l, 0)
	slice := parent.Child(t, "kubepods.slice")
	missing := host.Cgroup(path.Join(string(parent.Path), "kubepods"))
	knobs := "dirty_background_bytes: 8M, dirty_bytes: 16M, min_free_kbytes: 0"
	refusal := []string{"manage.under: " + string(missing) + " does not exist; " +
		string(slice.Path) + " does (systemd cgroup driver): set manage.under to it"}

	t.Run("at start", func(t *testing.T) {
		d := newDaemon(t, managedConfig(missing, knobs))
		d.launch()
		err := d.wait(readyTimeout * slow())
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("memcgd run with manage.under %s: %v, want exit status 1; log:\n%s", missing, err, tail(d.logText(), 30))
		}
		line, ok := d.waitLog(0, 0, "manage.under")
		if !ok {
			t.Fatalf("no line naming manage.under in the log:\n%s", tail(d.logText(), 30))
		}
		t.Log(line)
		for _, w := range append([]string{d.config}, refusal...) {
			if !strings.Contains(line, w) {
				t.Errorf("the refusal does not say %q", w)
			}
		}
	})

	t.Run("at reload", func(t *testing.T) {
		d := newDaemon(t, managedConfig(parent.Path, knobs))
		d.start()
		n, err := d.managedCount()
		if err != nil || n != 2 {
			t.Fatalf("the daemon reports %d cgroups (%v), want 2: %s and %s", n, err, parent.Path, slice.Path)
		}
		from := len(d.logText())
		d.setConfig(managedConfig(missing, knobs))
		d.signal(syscall.SIGHUP)
		line, ok := d.waitLog(from, within, "config reload")
		if !ok {
			t.Fatalf("no \"config reload\" line in the log %v after SIGHUP", within)
		}
		t.Log(line)
		for _, w := range append([]string{"config reload refused"}, refusal...) {
			if !strings.Contains(line, w) {
				t.Errorf("the reload's log line does not say %q", w)
			}
		}
		if n, err := d.managedCount(); err != nil || n != 2 {
			t.Errorf("after the refused reload the daemon reports %d cgroups (%v), want the 2 it had", n, err)
		}
		if !d.running() {
			t.Fatalf("memcgd exited: %v", d.err)
		}
		d.stop()
	})
}
