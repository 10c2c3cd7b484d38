package observe

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/sys/unix"
)

// parentDir opens a file from its cgroup's parent, keeps that parent for
// the siblings read next, opens the hierarchy root's files whole, fails
// the children of a missing parent, or of one without child directories,
// without opening it again, and opens a parent afresh once it has kept it
// for maxAge.
func TestParentDir(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mount := t.TempDir()
		write := func(rel, content string) {
			t.Helper()
			p := filepath.Join(mount, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		write("f", "root")
		write("a/x/f", "a/x")
		write("a/y/f", "a/y")
		var d parentDir
		defer d.close()
		read := func(rel string) (string, error) {
			t.Helper()
			fd, err := d.open(append([]byte(filepath.Join(mount, rel)), 0), len(mount))
			if err != nil {
				return "", err
			}
			defer unix.Close(fd)
			b := make([]byte, 64)
			n, err := unix.Pread(fd, b, 0)
			return string(b[:max(n, 0)]), err
		}
		steps := []struct {
			name    string
			rel     string
			sleep   time.Duration // before the read
			make    string        // made before the read
			want    string
			wantErr error
			parent  string // the parent kept after the read
			sameFD  bool   // the handle kept from the step before
		}{
			{name: "the root's file, whole", rel: "f", want: "root"},
			{name: "a child", rel: "a/x/f", want: "a/x", parent: "a"},
			{name: "its sibling, same handle", rel: "a/y/f", want: "a/y", parent: "a", sameFD: true},
			{name: "a missing parent", rel: "b/z/f", wantErr: syscall.ENOENT, parent: "b"},
			{name: "made within maxAge: still missing", rel: "b/z/f", make: "b/z/f", wantErr: syscall.ENOENT, parent: "b"},
			{name: "after maxAge: opened afresh", rel: "b/z/f", sleep: maxAge, want: "b/z", parent: "b"},
			{name: "a parent without child directories", rel: "c/w/f", make: "c/f", sleep: maxAge, wantErr: syscall.ENOENT, parent: "c"},
			{name: "a child made within maxAge: still missing", rel: "c/w/f", make: "c/w/f", wantErr: syscall.ENOENT, parent: "c"},
			{name: "after maxAge: found", rel: "c/w/f", sleep: maxAge, want: "c/w", parent: "c"},
		}
		lastFD := -1
		for _, s := range steps {
			time.Sleep(s.sleep)
			if s.make != "" {
				write(s.make, filepath.Dir(s.make))
			}
			got, err := read(s.rel)
			if !errors.Is(err, s.wantErr) || got != s.want {
				t.Errorf("%s: read %q, %v; want %q, %v", s.name, got, err, s.want, s.wantErr)
			}
			kept := ""
			if len(d.path) > 0 {
				kept = string(d.path[:len(d.path)-1])
			}
			if s.parent != "" && kept != filepath.Join(mount, s.parent) {
				t.Errorf("%s: keeps %q, want %q", s.name, kept, filepath.Join(mount, s.parent))
			}
			if s.sameFD && d.fd != lastFD {
				t.Errorf("%s: a new handle %d, want the one kept, %d", s.name, d.fd, lastFD)
			}
			lastFD = d.fd
		}
	})
}
