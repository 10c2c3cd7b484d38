package control

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Listen opens the control socket at path: its directory is created 0700
// if missing and must not be writable by anyone but the daemon's own user
// (else another user could swap the socket); the socket is made 0600. A
// socket file left by a daemon that died is removed first, but only when
// nothing answers on it: a second daemon must not steal a live one's
// socket. The listener removes the socket file when closed.
func Listen(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := checkDir(dir); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := removeStale(path); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	// The socket is created under the umask; connecting needs write
	// permission, which the usual umask already denies others, and the
	// directory is 0700: the window before this chmod admits no one.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return ln, nil
}

// checkDir refuses a socket directory that is not a real directory owned
// by this process's user and closed to writes by others.
func checkDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: not a directory (mode %v): want a directory for the socket", dir, fi.Mode())
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no owner information", dir)
	}
	if euid := os.Geteuid(); int(st.Uid) != euid {
		return fmt.Errorf("%s: owned by uid %d: want uid %d, the daemon's own", dir, st.Uid, euid)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%s: mode %v is writable by group or others: want 0700", dir, perm)
	}
	return nil
}

// removeStale removes a socket file at path that nothing listens on.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket (mode %v): remove it or choose another --socket", path, fi.Mode())
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("%s: another memcgd is listening on it", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("probe %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	return nil
}
