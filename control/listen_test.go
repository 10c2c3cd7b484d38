package control

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestListen(t *testing.T) {
	tests := []struct {
		name   string
		before func(t *testing.T, dir, sock string) // prepares dir, the socket's directory
		errHas []string
	}{
		{name: "creates the directory and the socket"},
		{
			name: "removes a stale socket that nothing listens on",
			before: func(t *testing.T, dir, sock string) {
				mkdir(t, dir, 0o700)
				ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
				if err != nil {
					t.Fatal(err)
				}
				ln.SetUnlinkOnClose(false) // as a killed daemon leaves it
				ln.Close()
			},
		},
		{
			name: "refuses a socket another daemon listens on",
			before: func(t *testing.T, dir, sock string) {
				mkdir(t, dir, 0o700)
				ln, err := net.Listen("unix", sock)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { ln.Close() })
			},
			errHas: []string{"another memcgd is listening"},
		},
		{
			name: "refuses to remove a file that is not a socket",
			before: func(t *testing.T, dir, sock string) {
				mkdir(t, dir, 0o700)
				if err := os.WriteFile(sock, []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			errHas: []string{"exists and is not a socket"},
		},
		{
			name:   "refuses a directory others can write",
			before: func(t *testing.T, dir, sock string) { mkdir(t, dir, 0o777) },
			errHas: []string{"writable by group or others", "want 0700"},
		},
		{
			name: "refuses a directory another user owns",
			before: func(t *testing.T, dir, sock string) {
				if os.Geteuid() != 0 {
					t.Skip("needs root to give the directory away")
				}
				mkdir(t, dir, 0o700)
				if err := os.Chown(dir, 65534, 65534); err != nil {
					t.Fatal(err)
				}
			},
			errHas: []string{"owned by uid 65534", "want uid 0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run", "memcgd")
			sock := filepath.Join(dir, "control.sock")
			if tt.before != nil {
				tt.before(t, dir, sock)
			}
			ln, err := Listen(sock)
			if len(tt.errHas) > 0 {
				if err == nil {
					ln.Close()
					t.Fatalf("Listen succeeded, want an error mentioning %q", tt.errHas)
				}
				for _, s := range tt.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			for _, c := range []struct {
				path string
				mode os.FileMode
			}{{dir, os.ModeDir | 0o700}, {sock, os.ModeSocket | 0o600}} {
				fi, err := os.Lstat(c.path)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode() != c.mode {
					t.Errorf("%s mode %v, want %v", c.path, fi.Mode(), c.mode)
				}
			}
		})
	}
}

func TestDialNotRunning(t *testing.T) {
	tests := []struct {
		name   string
		before func(t *testing.T, sock string)
	}{
		{"no socket file", func(*testing.T, string) {}},
		{"a stale socket file", func(t *testing.T, sock string) {
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			ln.SetUnlinkOnClose(false)
			ln.Close()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "control.sock")
			tt.before(t, sock)
			_, err := Dial(sock)
			if !errors.Is(err, ErrNotRunning) || !strings.Contains(err.Error(), sock) {
				t.Errorf("Dial = %v, want ErrNotRunning naming %s", err, sock)
			}
		})
	}
}

func mkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}
